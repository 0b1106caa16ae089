"""End to end with a model target and an LLM judge: webhook -> worker -> litellm over real HTTP
to the fake provider -> check run and comment on the fake GitHub.

The fake provider runs in this process (a thread); the workers are separate processes that reach
it on loopback with the key from their environment.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.model_support import KEY_ENV, build_support_repo, open_pull_request, support_config
from tests.fakes.fake_llm import running_fake_llm
from tests.unit.worker_support import commit
from worker.cli.demo import Stack

pytestmark = pytest.mark.slow

OWNER, REPO = "acme", "llm-bot"
TICKETS = ["refund for order 1", "refund for order 2", "refund for order 3", "refund for order 4"]


def config(url: str, settings: str = "") -> str:
    return support_config(url, settings="  concurrency: 4\n" + settings,
                          rubric="The reply promises the refund.",
                          target="      pricing: {input: 2, cached_input: 0.5, output: 8}\n")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("llm-e2e")
    with running_fake_llm() as llm:
        repo = work / REPO
        base = build_support_repo(repo, config(llm.url), "Be kind. Ticket: {{ input }}", TICKETS)
        with Stack(work, workers=1, worker_env={KEY_ENV: "sk-e2e-fake"}) as stack:
            yield {"stack": stack, "llm": llm, "repo": repo, "base": base}


def open_pr(world: dict[str, Any], number: int, head: str,
            base: str | None = None) -> dict[str, Any]:
    return open_pull_request(world["stack"], world["repo"], (OWNER, REPO), number, head,
                             base or world["base"])


def test_a_prompt_change_the_judge_fails_is_a_regression_with_costs(world):
    llm, stack = world["llm"], world["stack"]
    llm.reset()
    llm.setup({"rules": [
        {"model": "judge-model", "match": "<answer>\necho: Be kind.", "reply": "**PASS**"},
        {"model": "judge-model", "match": "", "reply": "The reply refuses. VERDICT: FAIL"}]})
    head = commit(world["repo"], "pr/rude", {"prompts/support.txt": "Go away. {{ input }}"})
    run = open_pr(world, 1, head)
    assert run["conclusion"] == "failure"
    assert len(run["annotations"]) == 4  # every ticket regressed: the judge fails them all
    summary = run["output"]["summary"]
    assert "Model calls at head: 8 provider calls" in summary
    assert "Model calls at base: 8 provider calls" in summary
    calls = llm.calls()
    assert sorted({c["model"] for c in calls}) == ["bot-model", "judge-model"]
    assert len(calls) == 16
    comment = [c for c in stack.state()["comments"] if c["issue_number"] == 1]
    assert len(comment) == 1 and "Model calls at head" in comment[0]["body"]
    assert stack.state()["violations"] == []


def test_a_stalled_call_times_out_and_the_check_still_completes(world):
    """Field case: timeout 5 s, 2 retries, 4 examples, the 3rd stalls: errored after ~15 s.

    The limits are base's (a pull request's own apply once merged, issue 12), so the base
    commit sets them."""
    llm = world["llm"]
    llm.reset()
    llm.setup({"faults": [{"model": "bot-model", "match": "order 3", "stall": True,
                           "times": 3}],
               "rules": [{"model": "judge-model", "match": "", "reply": "PASS"}]})
    settings = "  timeout: 5\n  retry: {max_retries: 2, backoff_base: 0.1}\n" \
               "  max_provider_error_rate: 0.5\n  cache: false\n"  # every call is sent
    base = commit(world["repo"], "stall-base", {".llmgate.yml": config(llm.url, settings)})
    head = commit(world["repo"], "pr/stall", {"README.md": "stalls\n"}, start="stall-base")
    run = open_pr(world, 2, head, base)
    assert run["status"] == "completed" and run["conclusion"] == "success"
    stalled = [c for c in llm.calls() if c["fault"] == "stall"]
    assert len(stalled) == 3  # the first try and 2 retries
    span = stalled[-1]["t"] - stalled[0]["t"] + 5  # the last attempt also waited 5 s
    assert 15 <= span <= 25  # about 15 s: three 5 s timeouts and two short backoffs
    answered = [c for c in llm.calls() if c["model"] == "bot-model" and c["fault"] is None]
    assert len(answered) == 7  # head's other 3 examples and base's 4 (cache: false)
    assert "1 example timed out, not caused by the pull request" in run["output"]["summary"]


def test_an_unset_api_key_env_at_head_fails_on_its_config_line(world):
    """Issue 12's field case through the App's processes: the check was neutral (passing).
    Issue 31: it is refused at configuration before base sends a call."""
    llm, stack = world["llm"], world["stack"]
    llm.reset()
    llm.setup({"rules": [{"model": "judge-model", "match": "", "reply": "PASS"}]})
    text = config(llm.url).replace(f"      api_key_env: {KEY_ENV}\n",
                                   "      api_key_env: FAKE_LLM_KEY_UNSET\n")
    line = text.splitlines().index("      api_key_env: FAKE_LLM_KEY_UNSET") + 1
    head = commit(world["repo"], "pr/unset-key", {".llmgate.yml": text,
                                                  "prompts/support.txt": "Go away."})
    run = open_pr(world, 3, head)
    assert run["conclusion"] == "failure"
    assert run["output"]["title"] == f"llmgate: configuration error in .llmgate.yml:{line}"
    [on_config] = [a for a in run["annotations"] if a["path"] == ".llmgate.yml"]
    assert on_config["start_line"] == line
    assert "the worker has no FAKE_LLM_KEY_UNSET" in on_config["message"]
    [body] = [c["body"] for c in stack.state()["comments"] if c["issue_number"] == 3]
    assert "the worker has no FAKE_LLM_KEY_UNSET" in body
    assert llm.calls() == []  # issue 31: refused before base sent any call
    assert stack.state()["violations"] == []
