"""The consistency example: a prompt change that makes answers follow the option order fails
the gate on RC_agree and CORE while accuracy on the originals holds; the fix passes."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.fakes.fake_llm import running_fake_llm

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "quiz-consistency"


def _builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("quiz_build_repo", EXAMPLE / "build_repo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_recorded_answers_are_the_builders_and_the_config_is_valid() -> None:
    from worker.evals.config.load import load_config

    assert json.loads((EXAMPLE / "recorded.json").read_text()) == _builder().fake_setup()
    config = load_config(EXAMPLE)
    assert config is not None
    (suite,) = config.suites
    assert suite.consistency is not None and set(suite.gate) == {
        "original_accuracy", "rc_agree", "core"}


def _metrics(doc: dict, side: str) -> dict:  # type: ignore[type-arg]
    metrics: dict = doc["metrics"]["quiz"][side]  # type: ignore[type-arg]
    return metrics


@pytest.mark.slow
def test_order_dependent_answers_fail_and_the_fix_passes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from worker.cli.main import main as llmgate_main

    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("QUIZ_API_KEY", "test-key")
    with running_fake_llm(_builder().fake_setup()) as llm:
        repo = tmp_path / "repo"
        subprocess.run([sys.executable, str(EXAMPLE / "build_repo.py"), str(repo),
                        "--api-base", llm.url], check=True, capture_output=True)
        out = tmp_path / "order.json"
        code = llmgate_main(["run", "--repo", str(repo), "--base", "main", "--head",
                             "pr/order", "--format", "json", "--output", str(out)])
        order = json.loads(out.read_text())
        fixed = llmgate_main(["run", "--repo", str(repo), "--base", "main", "--head",
                              "pr/fix", "--format", "json", "--output", str(out)])
        fix = json.loads(out.read_text())
        calls = len(llm.calls())
    assert (code, order["conclusion"]) == (1, "failure")
    head, base = _metrics(order, "head"), _metrics(order, "base")
    assert head["original_accuracy"] == base["original_accuracy"] == 1.0
    assert base["rc_agree"] == 1.0 and head["rc_agree"] < 0.7
    assert head["core"] < 0.5
    assert "accuracy" not in head and "f1_macro" not in head  # options are no classes
    failed = {(o["metric"], o["status"]) for o in order["outcomes"] if o["status"] == "fail"}
    assert ("rc_agree", "fail") in failed and ("core", "fail") in failed
    paired = [o for o in order["outcomes"] if o["metric"] == "rc_agree"
              and o["rule"].startswith("regression")]  # question by question
    assert [o["status"] for o in paired] == ["regression"]  # a significant drop
    assert not any(o["metric"] == "original_accuracy" and o["status"] == "fail"
                   for o in order["outcomes"])
    assert (fixed, fix["conclusion"]) == (0, "success")
    assert _metrics(fix, "head")["rc_agree"] == 1.0
    # the estimate's count: 12 questions x 6 variants, at base and head, in each of two runs;
    # the second run's base answers come from llmgate run's on-disk response cache
    assert calls == 3 * 12 * 6
    assert "72 provider calls" in capsys.readouterr().err
