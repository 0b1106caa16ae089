"""A repository whose pull requests regress 5 examples and change how they are scored.

Issue 12's second part: a pull request that regresses must not pass by changing only the
pull request, and before it each of these branches passed (``success``): head's scoring was
used and base was re-scored with it, and examples gone at head were left out.

Every branch regresses the same 5 of 10 tickets, ``t1``..``t5`` (the orders; the parcels
``t6``..``t10`` stay as they were): its prompt (`BAD_PROMPT`) answers an order with its
length, so the answer is neither the expected text nor mentions a refund. Then each changes
one part of the suite's evaluation contract:

- ``pr/expected`` (base ``main``, assertion ``equals``): the 5 ``expected`` values become the
  regressed answers;
- ``pr/delete`` (base ``main``): the 5 examples are deleted from the dataset;
- ``pr/loosen`` (base ``contains``, ``contains: refund``): the assertion becomes
  ``contains: echo``, which every answer meets;
- ``pr/lenient`` (base ``judged``, an ``llm_judge`` on ``strict-judge``): ``settings.judge``
  points at ``lenient-judge``, which passes everything (`judges` sets the fake's rules);
- ``pr/timeouts`` (base ``tolerant``: ``max_provider_error_rate: 0.5``, 1 s timeout):
  head's regressed calls never get an answer (`stall_regressed`), so under the allowance
  they would be left unscored;
- ``pr/no-verdict`` (base ``judged-tolerant``: ``max_judge_error_rate: 0.5``): the judge
  replies without a verdict to head's regressed answers (`judges`);
- ``pr/fixed`` (base ``main``): the prompt is unchanged and a sixth kind of ticket is added
  at head (a new example that passes): a contract change that passes under both.

Every model call goes to the fake provider on loopback (tests/fakes/fake_llm.py), which
echoes the prompt (``echo: <prompt>``) unless a rule says otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import failclosed_support
from tests.unit.llm_support import KEY_ENV
from tests.unit.worker_support import commit, git

GOOD_PROMPT = "Customer says: {{ input }}"
BAD_PROMPT = ("{% if 'order' in input %}Ticket of {{ input | length }} characters."
              "{% else %}Customer says: {{ input }}{% endif %}")
INPUTS = {f"t{n}": f"refund for order {n}" for n in range(1, 6)} | {
    f"t{n}": f"refund for parcel {n}" for n in range(6, 11)}
REGRESSED = ["t1", "t2", "t3", "t4", "t5"]
#: The answer to an order under `BAD_PROMPT` (every order's input has 18 characters).
BAD_ANSWER = "echo: Ticket of 18 characters."


def rows(expected: dict[str, str] | None = None, ids: list[str] | None = None,
         inputs: dict[str, str] = INPUTS) -> str:
    """The dataset of ``inputs`` (or of its ``ids``), each expecting the good answer unless
    ``expected`` says otherwise."""
    chosen = ids or list(inputs)
    return "".join(json.dumps({"id": i, "input": inputs[i], "expected": (expected or {}).get(
        i, f"echo: Customer says: {inputs[i]}")}) + "\n" for i in chosen)


def config(url: str, assertion: str, settings: str = "") -> str:
    """The one-suite config ``tickets`` of tests/unit/failclosed_support.py with
    ``assertion`` (YAML list items)."""
    return failclosed_support.config(url, settings=settings, assertions=assertion)


EQUALS = "      - type: equals\n"
CONTAINS = failclosed_support.REFUND.replace("refund", "{value}")
JUDGED = "      - type: llm_judge\n        rubric: The reply must repeat the customer's words.\n"


def judge_settings(url: str, model: str, extra: str = "") -> str:
    return (f'  judge: {{model: openai/{model}, api_base: "{url}", api_key_env: {KEY_ENV}}}\n'
            + extra)


def judges(llm: FakeLLMServer) -> None:
    """The strict judge fails an answer without the customer's words; the lenient one passes
    all; on ``pr/no-verdict`` the strict one gives no verdict to those answers instead."""
    llm.setup({"rules": [
        {"model": "strict-judge", "match": "<answer>\nShrug", "reply": "Hard to say."},
        {"model": "strict-judge", "match": "<answer>\necho: Ticket", "reply": "VERDICT: FAIL"},
        {"model": "strict-judge", "match": "", "reply": "VERDICT: PASS"},
        {"model": "lenient-judge", "match": "", "reply": "VERDICT: PASS"},
        {"model": "bot-model", "match": "Shrug", "reply": "Shrug"}]})


def stall_regressed(llm: FakeLLMServer) -> None:
    """Head's regressed prompts (`BAD_PROMPT`'s orders) are never answered."""
    llm.setup({"faults": [{"match": "Ticket of", "stall": True, "times": None}]})


def build_repo(dest: Path, url: str) -> dict[str, str]:
    """Create the repository at ``dest`` for the fake provider at ``url``; return branch -> SHA
    (``main`` checked out afterwards)."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    bad = {"prompts/support.txt": BAD_PROMPT}
    files = {"prompts/support.txt": GOOD_PROMPT, "evals/tickets.jsonl": rows()}
    shas = {"main": commit(dest, "main", {".llmgate.yml": config(url, EQUALS), **files})}
    shas["pr/expected"] = commit(dest, "pr/expected", {**bad, "evals/tickets.jsonl": rows(
        dict.fromkeys(REGRESSED, BAD_ANSWER))})
    shas["pr/delete"] = commit(dest, "pr/delete", {**bad, "evals/tickets.jsonl": rows(
        ids=[i for i in INPUTS if i not in REGRESSED])})
    shas["pr/fixed"] = commit(dest, "pr/fixed", {"evals/tickets.jsonl": rows(
        inputs={**INPUTS, "t11": "refund for a gift card"})})
    strict, lenient = judge_settings(url, "strict-judge"), judge_settings(url, "lenient-judge")
    shrug = {"prompts/support.txt": BAD_PROMPT.replace("Ticket of", "Shrug. Ticket of")}
    for base, pr, base_config, head_config, head_files in (
            ("contains", "pr/loosen", config(url, CONTAINS.format(value="refund")),
             config(url, CONTAINS.format(value="echo")), bad),
            ("judged", "pr/lenient", config(url, JUDGED, strict), config(url, JUDGED, lenient),
             bad),
            ("tolerant", "pr/timeouts", config(url, EQUALS, _tolerant("provider")), None, bad),
            ("judged-tolerant", "pr/no-verdict",
             config(url, JUDGED, strict + _tolerant("judge")), None, shrug)):
        shas[base] = commit(dest, base, {".llmgate.yml": base_config, **files})
        head = {} if head_config is None else {".llmgate.yml": head_config}
        shas[pr] = commit(dest, pr, {**head_files, **head}, start=base)
    return shas


def _tolerant(kind: str) -> str:
    return f"  max_{kind}_error_rate: 0.5\n  timeout: 1\n"


@pytest.fixture(scope="module")
def contract_repo(llm_server: FakeLLMServer,
                  tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """`build_repo` once per test module, for the module's fake provider: (path, SHAs)."""
    path = tmp_path_factory.mktemp("contract") / "repo"
    return path, build_repo(path, llm_server.url)
