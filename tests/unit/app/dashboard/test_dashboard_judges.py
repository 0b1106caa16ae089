"""A repository page charts its judges' agreement with people over the gates that measured it.

Recorded for real: two pull requests that each change the suite's judge are gated through the
App (real arq, Redis and git, the schema-checking fake GitHub, the fake provider over HTTP), so
base's ``judge:`` rules run the new judge on the labelled set (worker/pipeline/judge_trust.py)
and the gate's record keeps the figures (worker/baselines/gate_records.py `judge_records`).
PR 1's judge passes everything (agreement 0.5, kappa 0, 8 labels: not trusted), PR 2's agrees
(1.0, kappa 1). Then the dashboard's own routes read that Redis.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.fakes.fake_github import FakeGitHubServer
from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import events_support, llm_support
from tests.unit.app.dashboard.support import FixedReposAccess, dashboard
from tests.unit.events_support import run_burst
from tests.unit.pipeline.judge_trust_support import GOOD, LAX, RULES, judged, repo
from tests.unit.worker_support import OWNER, REPO, commit, gate_payload, git
from worker import history_contract as history
from worker.baselines.gate_records import judge_records
from worker.contract import gate_job_id
from worker.evals.types import GateReport, JudgeAgreement, RuleOutcome

github = events_support.github  # fixtures
llm_server = llm_support.llm_server
llm = llm_support.llm
pytestmark = pytest.mark.filterwarnings("ignore:Call to deprecated close:DeprecationWarning")
REPO_KEY = f"{OWNER}/{REPO}"
#: A third judge model that rates the labels as people did.
AGREEING = "openai/judge-new"


async def _gate(github: FakeGitHubServer, root: Path, number: int, head: str,
                base: str) -> str:
    github.fake.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": number,
                                  "head_sha": head, "base_sha": base, "author": "writer"}]})
    payload = gate_payload(root.as_uri(), head, base, number=number)
    done = await run_burst([("gate_pull_request", payload,
                             gate_job_id(payload["repo"], number, head))])
    return str(next(iter(done.values()))["conclusion"])


async def test_two_gates_that_changed_the_judge_are_charted_on_the_repository_page(
        github: FakeGitHubServer, llm: FakeLLMServer, tmp_path: Path, redis) -> None:
    llm.setup({"rules": [{"model": "judge-new", "match": "bad answer", "reply": "VERDICT: FAIL"},
                         {"model": "judge-new", "match": "", "reply": "VERDICT: PASS"},
                         *RULES]})
    root = repo(tmp_path / "repo", llm.url, GOOD)
    git(root, "init", "-q", "-b", "main")
    base = commit(root, "main", {})
    lax = commit(root, "pr1", {".llmgate.yml": judged(llm.url, LAX)})
    agreeing = commit(root, "pr2", {".llmgate.yml": judged(llm.url, AGREEING)})

    assert await _gate(github, root, 1, lax, base) == "failure"
    assert await _gate(github, root, 2, agreeing, base) == "success"

    first, second = [g["judges"] for g in await history.judge_history(redis, REPO_KEY)][::-1]
    assert first == [{"suite": "s", "criterion": "llm_judge", "agreement": 0.5,
                      "reference": 1.0, "kappa": 0.0, "n": 8, "status": "fail"}]
    assert second == [{"suite": "s", "criterion": "llm_judge", "agreement": 1.0,
                       "reference": 1.0, "kappa": 1.0, "n": 8, "status": "pass"}]

    async with dashboard(redis, FixedReposAccess([REPO_KEY])) as client:
        page = (await client.get(f"/dashboard/{REPO_KEY}")).text
        data = (await client.get(f"/dashboard/{REPO_KEY}",
                                 headers={"accept": "application/json"})).json()
    [series] = data["judge_agreement"]
    assert (series["suite"], series["criterion"]) == ("s", "llm_judge")
    assert [(p["pr_number"], p["agreement"], p["kappa"], p["n"], p["status"])
            for p in series["points"]] == [(1, 0.5, 0.0, 8, "fail"), (2, 1.0, 1.0, 8, "pass")]
    section = page[page.index("<h2>Judge agreement with people</h2>"):
                   page.index("<h2>Examples that flap most</h2>")]
    assert 'aria-label="s · llm_judge: agreement with people"' in section
    tips = re.findall(r"<title>(#\d: [^<]*)</title>", section)
    assert [t.split(" · ")[0] for t in tips] == ["#1: 0.5", "#2: 1"]
    assert "kappa 0.00 · n 8 · reference 100% · fail" in tips[0]
    assert '<td class="n">1</td><td class="n">1</td><td class="n">8</td>' in section  # PR 2
    assert "No gate calibrated a judge" not in page


async def test_a_repository_where_no_gate_calibrated_says_so(redis) -> None:
    from tests.unit.app.dashboard.support import write_history

    await write_history(redis, runs=3)
    async with dashboard(redis, FixedReposAccess(["octo/widgets"])) as client:
        page = (await client.get("/dashboard/octo/widgets")).text
        data = (await client.get("/dashboard/octo/widgets",
                                 headers={"accept": "application/json"})).json()
    assert "No gate calibrated a judge" in page
    assert data["judge_agreement"] == []


def test_a_report_without_measured_figures_keeps_the_agreement_and_no_kappa() -> None:
    outcomes = (RuleOutcome("s", "judge agreement (tone | polite)", "min_agreement 0.80", 0.9,
                            0.7, -0.2, "fail", "x"),
                RuleOutcome("s", "judge agreement (tone | polite)", "max_drift 0.05", 0.9, 0.7,
                            -0.2, "fail", "y"),
                RuleOutcome("s", "pass_rate", "min 0.5", None, 1.0, None, "pass", ""))
    report = GateReport("failure", outcomes, (), None, None)
    assert judge_records(report, "svc") == [{
        "suite": "svc: s", "criterion": "tone | polite", "agreement": 0.7, "reference": 0.9,
        "kappa": None, "n": None, "status": "fail"}]
    measured = GateReport("failure", outcomes, (), None, None, judge_agreement=(
        JudgeAgreement("s", "tone | polite", "openai/b", "evals/l.jsonl", 0.7, 0.9, 0.41, 20),))
    assert [(r["kappa"], r["n"]) for r in judge_records(measured)] == [(0.41, 20)]
