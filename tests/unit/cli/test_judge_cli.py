"""``llmgate judge calibrate`` and ``llmgate run`` with a judge swapped in a pull request.

litellm over real HTTP to the fake provider; a real git repository for ``llmgate run``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.pipeline.judge_trust_support import GOOD, LAX, RULES, judged, repo
from tests.unit.worker_support import commit, git
from worker.cli.judge import EXIT_CONFIG_ERROR, EXIT_OK, EXIT_RULE_FAILED
from worker.cli.main import EXIT_GATE_FAILED, main

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)


def calibrate(capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> tuple[int, str]:
    code = main(["judge", "calibrate", "--suite", "s", "--repo", str(root), *extra])
    out, err = capsys.readouterr()
    return code, out + err


def test_calibrate_reports_saves_a_snapshot_and_then_the_drift(
        llm: FakeLLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    llm.setup({"rules": RULES})
    root = repo(tmp_path, llm.url, GOOD)
    code, text = calibrate(capsys, root, "--save-snapshot")
    assert code == EXIT_OK
    assert "| llm_judge | `openai/judge-good` | 8 | 0 | 1.000" in text
    assert "No disagreements." in text
    assert "wrote evals/labels.snapshot.json" in text
    snapshot = json.loads((root / "evals" / "labels.snapshot.json").read_text())
    assert snapshot["criteria"]["llm_judge"]["agreement"] == 1.0
    assert snapshot["criteria"]["llm_judge"]["model"] == GOOD

    (root / ".llmgate.yml").write_text(judged(llm.url, LAX))  # a judge that passes everything
    code, text = calibrate(capsys, root, "--format", "json")
    assert code == EXIT_RULE_FAILED  # min_agreement 0.8 and max_drift 0.05 of the suite
    doc = json.loads(text[:text.rindex("}") + 1])
    (criterion,) = doc["criteria"]
    assert criterion["agreement"]["value"] == 0.5 and criterion["drift"] == 0.5
    assert criterion["confusion"] == [[0, 4], [0, 4]]  # human fail: judge passed all four
    assert criterion["disagreements"][0] == {"id": "b0", "human": 0, "judge": 1,
                                             "reason": "Looks fine to me."}
    assert {(r["rule"], r["status"]) for r in doc["rules"]} == {
        ("min_agreement 0.80", "fail"), ("max_drift 0.05", "fail")}
    code, text = calibrate(capsys, root)
    assert "| b0 | fail | pass | Looks fine to me. |" in text
    assert "-0.500" in text  # the drift column


def test_calibrate_refuses_what_it_cannot_use(llm: FakeLLMServer, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    root = repo(tmp_path, llm.url, GOOD)
    (root / "evals" / "labels.jsonl").write_text('{"id": "a", "output": "x", "label": "maybe"}\n')
    code, text = calibrate(capsys, root)
    assert code == EXIT_CONFIG_ERROR
    assert "evals/labels.jsonl" in text and "`label` must be pass or fail" in text
    code, text = main(["judge", "calibrate", "--suite", "nope", "--repo", str(root)]), \
        capsys.readouterr().err
    assert code == EXIT_CONFIG_ERROR and text == (
        "llmgate: configuration error: .llmgate.yml: --suite nope: no such suite in "
        ".llmgate.yml (its suites: s)\n")


@pytest.mark.slow
def test_run_fails_a_pull_request_that_swaps_in_a_disagreeing_judge(
        llm: FakeLLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    llm.setup({"rules": RULES})
    root = repo(tmp_path / "repo", llm.url, GOOD)
    git(root, "init", "-q", "-b", "main")
    commit(root, "main", {})
    commit(root, "pr", {".llmgate.yml": judged(llm.url, LAX)})
    monkeypatch.chdir(root)
    code = main(["run", "--base", "main", "--head", "pr", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    rows = {o["rule"]: o for o in report["outcomes"]
            if o["metric"] == "judge agreement (llm_judge)"}
    assert rows["min_agreement 0.80"]["status"] == "fail"
    assert (rows["min_agreement 0.80"]["base"], rows["min_agreement 0.80"]["head"]) == (1.0, 0.5)
    assert report["headline"].startswith("judge not trusted")
    assert any("agreement 100% -> 50%" in n for n in report["notes"])
