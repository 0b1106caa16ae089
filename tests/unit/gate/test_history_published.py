"""A pull request gate's history record holds what was published, and its examples' outputs.

Through the real arq burst worker, real git, the schema-checking fake GitHub and the session's
redis-server, then the dashboard's own routes over that Redis:

- one head in two pull requests (worker/gate/shared_head.py): PR 2's own verdict passes, but
  its check run is published ``failure`` because PR 1 into ``main`` fails; its record says so
  (before: ``success`` and "all 1 rules pass", what its check run never showed);
- a head that regresses an example records that example's base and head outputs, redacted as
  the report is (a GitHub-token-shaped string the target prints becomes ``[redacted]``), and the
  example's page shows them side by side, escaped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit import worker_support
from tests.unit.app.dashboard.support import FixedReposAccess, dashboard
from tests.unit.events_support import run_burst
from tests.unit.gate import test_shared_head
from tests.unit.worker_support import (
    ECHO,
    OWNER,
    REPO,
    WRITER,
    build_tiny_repo,
    commit,
    gate_payload,
)
from worker import history_contract as history
from worker.contract import gate_job_id

github = worker_support.github  # fixture
pytestmark = pytest.mark.filterwarnings("ignore:Call to deprecated close:DeprecationWarning")
REPO_KEY = f"{OWNER}/{REPO}"
#: A GitHub token shape (worker/security/redact.py `SECRET_SHAPES`), and markup, in an output.
TOKEN = "ghp_" + "A1b2C3d4" * 5
LEAK = ECHO.replace('"nope" if BROKEN and BROKEN in text else text',
                    f'"<b>nope</b> {TOKEN}" if text == "bravo" else text')


stacked = test_shared_head.stacked  # fixture: X2 on top of pr/drop


@pytest.fixture(scope="module")
def leaky(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The tiny repository and ``pr/leak``, whose target answers ``bravo`` with markup and a
    token."""
    repo = tmp_path_factory.mktemp("leaky") / "tiny"
    shas = build_tiny_repo(repo)
    shas["pr/leak"] = commit(repo, "pr/leak", {"echo.py": LEAK})
    return repo, shas


def _pull(number: int, head: str, base_sha: str, base_ref: str, url: str) -> dict[str, Any]:
    return {"owner": OWNER, "repo": REPO, "number": number, "head_sha": head,
            "base_sha": base_sha, "base_ref": base_ref, "head_ref": "x", "clone_url": url,
            "state": "open", "author": WRITER}


async def _gate(url: str, number: int, head: str, base: str, ref: str = "main") -> str:
    payload = gate_payload(url, head, base, number=number)
    payload["base_ref"] = ref
    done = await run_burst([("gate_pull_request", payload,
                             gate_job_id(payload["repo"], number, head))])
    return str(next(iter(done.values()))["conclusion"])


async def test_a_shared_head_records_the_conclusion_its_check_run_was_published_with(
        github, stacked, redis):
    repo, shas = stacked
    url, head = repo.as_uri(), shas["x2"]
    github.setup({"pulls": [_pull(1, head, shas["main"], "main", url),
                            _pull(2, head, shas["pr/drop"], "stack", url)]})

    assert await _gate(url, 1, head, shas["main"]) == "failure"
    assert await _gate(url, 2, head, shas["pr/drop"], "stack") == "failure"  # shown: PR 1's

    [pr2] = await history.list_pr_gates(redis, REPO_KEY, pr_number=2)
    [check] = [r for r in github.state()["check_runs"] if r["id"] == pr2["check_run_id"]]
    assert (pr2["conclusion"], check["conclusion"]) == ("failure", "failure")  # before: success
    assert pr2["why"] == ("blocked: this commit is also the head of #1 into main, "
                          "which failed")  # before: "all 1 rules pass."
    [pr1] = await history.list_pr_gates(redis, REPO_KEY, pr_number=1)
    assert pr1["conclusion"] == "failure"
    assert pr1["why"].startswith("decided by echo pass_rate max_drop 0.05 (fail")


async def test_a_regressed_example_records_both_outputs_redacted_and_its_page_shows_them(
        github, leaky, redis):
    repo, shas = leaky
    github.setup({"pulls": [_pull(3, shas["pr/leak"], shas["main"], "main", repo.as_uri())]})
    assert await _gate(repo.as_uri(), 3, shas["pr/leak"], shas["main"]) == "failure"

    [point] = await history.example_outputs(redis, REPO_KEY, "echo", "bravo")
    assert point["pr_number"] == 3 and point["sha"] == shas["pr/leak"]
    assert point["output"] == {
        "suite": "echo", "example_id": "bravo", "change": "regressed",
        "base_status": history.PASSED, "head_status": history.FAILED, "base": "bravo",
        "head": "<b>nope</b> [redacted]", "base_chars": 5, "head_chars": 22}
    assert await history.example_outputs(redis, REPO_KEY, "echo", "alpha") == []  # unchanged
    raw = await redis.hgetall(history.examples_key(REPO_KEY, point["run_id"]))
    assert all(TOKEN.encode() not in value for value in raw.values())

    async with dashboard(redis, FixedReposAccess([REPO_KEY])) as client:
        page = await client.get(f"/dashboard/{REPO_KEY}/examples/echo/bravo")
        data = (await client.get(f"/dashboard/{REPO_KEY}/examples/echo/bravo",
                                 headers={"accept": "application/json"})).json()
    assert page.status_code == 200
    assert TOKEN not in page.text and "<b>nope</b>" not in page.text
    assert ('<td class="base"><pre>bravo</pre></td>'
            '<td class="head"><pre>&lt;b&gt;nope&lt;/b&gt; [redacted]</pre></td>') in page.text
    assert "#3" in page.text and "regressed" in page.text
    assert [p["output"]["head"] for p in data["outputs"]] == ["<b>nope</b> [redacted]"]
