"""``llmgate calibrate``: A/A runs of a real, flaky command target, and the pure summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.worker_support import write_tickets_tree
from worker.cli.main import main
from worker.evals.config.load import parse_config
from worker.evals.score.metrics import suite_metrics
from worker.evals.types import AssertionResult, ExampleResult, RunResult, SuiteResult
from worker.pipeline.calibrate import calibrate_tree, render_markdown, summarize

#: Answers right, except that examples named "flaky..." are wrong on every other call.
BOT = """\
import json, os, sys
doc = json.load(open(sys.argv[1]))
os.makedirs("calls", exist_ok=True)
path = os.path.join("calls", doc["id"])
count = int(open(path).read()) + 1 if os.path.exists(path) else 1
open(path, "w").write(str(count))
wrong = doc["input"].startswith("flaky") and count % 2 == 0
json.dump({"output": "nope" if wrong else doc["input"]}, open(sys.argv[2], "w"))
"""


def make_repo(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The flaky bot's tree; its ``calls`` folder, where it counts its calls from run to run,
    is outside the tree (each run's targets get a fresh copy of it: worker/security/
    target_view.py), linked from it and made writable for targets."""
    rows = [{"id": f"t{i}", "input": ("flaky" if i in (1, 2) else "steady") + str(i),
             "expected": ("flaky" if i in (1, 2) else "steady") + str(i)} for i in range(4)]
    tree = write_tickets_tree(root, rows, BOT, "      pass_rate: {min: 0.5, max_new_failures: "
                                               "0, regression: {alpha: 0.05}}\n")
    calls = root.parent / f"{root.name}-calls"
    calls.mkdir()
    (tree / "calls").symlink_to(calls)
    monkeypatch.setenv("LLMGATE_SANDBOX_WRITE_PATHS", str(calls))
    return tree


@pytest.mark.slow
async def test_calibrate_counts_false_alarms_and_lists_flipping_examples(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_repo(tmp_path / "repo", monkeypatch)
    cal = await calibrate_tree(root, 3)
    assert (cal.runs, cal.comparisons, cal.false_alarms, cal.failed_checks) == (3, 2, 1, 1)
    assert cal.false_alarm_rate == 0.5
    assert cal.alarms_by_rule == {"tickets pass_rate: max_new_failures 0": 1}
    assert cal.alpha == 0.05
    assert cal.unstable == {"tickets": ["t1", "t2"]}
    assert cal.flip_rates == {"tickets": {"t1": 1.0, "t2": 1.0}}
    text = render_markdown(cal)
    assert "false-alarm rate of the relative rules: 1/2 = 0.500 (expected at most alpha = 0.05)" \
        in text
    assert 'quarantine: ["t1", "t2"]' in text


@pytest.mark.slow
def test_cli_calibrate_prints_json_and_exits_0(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_repo(tmp_path / "repo", monkeypatch)
    assert main(["calibrate", "--runs", "2", "--repo", str(root), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["runs"], doc["comparisons"], doc["false_alarm_rate"]) == (2, 1, 1.0)
    assert doc["unstable"] == {"tickets": ["t1", "t2"]}


def test_cli_calibrate_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["calibrate", "--runs", "1", "--repo", str(tmp_path)]) == 2
    assert "--runs must be at least 2" in capsys.readouterr().err
    assert main(["calibrate", "--repo", str(tmp_path)]) == 2
    assert "no .llmgate.yml" in capsys.readouterr().err
    root = make_repo(tmp_path / "repo", monkeypatch)
    assert main(["calibrate", "--runs", "2", "--repo", str(root), "--head", "nope"]) == 3


def result(i: int, passed: bool) -> ExampleResult:
    return ExampleResult(f"e{i}", i + 1, passed, False, "o", "o", None,
                         (AssertionResult("equals", passed, float(passed)),))


def test_summarize_identical_runs_has_no_alarm_and_no_unstable_example() -> None:
    config = parse_config("""\
version: 1
suites:
  - name: s
    dataset: d.jsonl
    target: {command: "x {input_file} {output_file}"}
    gate: {pass_rate: {max_drop: 0.0, non_inferiority_margin: 0.05}}
""")
    examples = tuple(result(i, i % 4 != 0) for i in range(40))
    same = RunResult("", {"s": SuiteResult("s", "d.jsonl", examples, suite_metrics(examples))})
    cal = summarize(config, [same, same, same, same])
    assert (cal.comparisons, cal.false_alarms, cal.unstable, cal.alpha) == (3, 0, {}, None)
    assert "No example changed between identical runs." in render_markdown(cal)
