"""``llmgate run --suite/--smoke/--samples`` through the real CLI on the tiny repository.

The tiny repository (`worker_support.build_tiny_repo`) has one suite, ``echo``, of four
examples; ``pr/drop`` breaks the second (``bravo``), so a full run fails ``max_drop``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.worker_support import build_tiny_repo
from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_GATE_FAILED, EXIT_PASS, main
from worker.cli.run_options import MAX_SAMPLES
from worker.evals.config.llm_suites import MAX_REPEATS


@pytest.fixture()
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tiny repository as the current folder (the tests only read it)."""
    repo = tmp_path / "repo"
    build_tiny_repo(repo)
    monkeypatch.chdir(repo)
    return repo


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict, str]:
    code = main(["run", "--base", "main", "--head", "pr/drop", "--format", "json", *args])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def comparison(report: dict) -> dict:
    return next(c for c in report["comparisons"] if c["metric"] == "pass_rate")


def test_smoke_runs_the_first_examples_at_both_sides(tiny, capsys):
    code, report, _ = run_json(capsys, "--smoke", "1")  # only alpha: bravo's break unseen
    assert (code, report["conclusion"], comparison(report)["n"]) == (EXIT_PASS, "success", 1)
    code, report, _ = run_json(capsys, "--smoke", "2")
    assert (code, comparison(report)["n"]) == (EXIT_GATE_FAILED, 2)
    assert [r["example_id"] for r in report["regressions"]] == ["bravo"]


def test_samples_sets_the_repeats_of_both_sides(tiny, capsys):
    code, report, _ = run_json(capsys, "--samples", "2", "--smoke", "1")
    assert (code, comparison(report)["repeats"], comparison(report)["n"]) == (EXIT_PASS, 2, 1)


def test_suite_selects_and_an_unknown_one_is_a_config_error(tiny, capsys):
    code, report, _ = run_json(capsys, "--suite", "echo")
    assert (code, comparison(report)["n"]) == (EXIT_GATE_FAILED, 4)
    code, report, err = run_json(capsys, "--suite", "echo", "--suite", "nope")
    assert code == EXIT_CONFIG_ERROR
    assert "--suite nope: no such suite in .llmgate.yml (its suites: echo)" in err


@pytest.mark.parametrize("args", [("--smoke", "0"), ("--smoke", "x"), ("--samples", "0"),
                                  ("--samples", str(MAX_SAMPLES + 1))])
def test_bad_numbers_exit_2_before_anything_runs(capsys, args):
    with pytest.raises(SystemExit) as exc:
        main(["run", *args])
    assert exc.value.code == EXIT_CONFIG_ERROR
    assert f"argument {args[0]}" in capsys.readouterr().err


def test_samples_has_the_limit_of_repeats():
    assert MAX_SAMPLES == MAX_REPEATS
