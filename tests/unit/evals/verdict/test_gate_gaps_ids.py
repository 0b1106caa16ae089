"""Missing example ids fail closed under rules that pair examples ("pairing must be exact").

An example without ``id`` gets its line number as id: enough for ``min``/``max_drop``, which
compare suite means, but a line number shifts when a line is added above it, so the rules that
pair base and head example by example must refuse it, naming the dataset and the line.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from pathlib import Path

import pytest

from worker.errors import ConfigError
from worker.evals.config.dataset import parse_dataset
from worker.evals.config.load import parse_config
from worker.evals.run.runner import RunState
from worker.evals.score.metrics import suite_metrics
from worker.evals.score.scoring import Item, score_items
from worker.evals.types import (
    AssertionSpec,
    Config,
    GateReport,
    RunResult,
    Settings,
    SuiteResult,
    TargetOutput,
)
from worker.evals.verdict.comparison import compare
from worker.pipeline.calibrate import summarize
from worker.pipeline.trees import gate_trees

DATASET = "evals/s.jsonl"
FIX = ("and a line number shifts when a line is added or removed above it: give every example "
       "an `id` (a unique string or integer)")


def config(gate: str) -> Config:
    return parse_config(f"""\
version: 1
suites:
  - name: s
    dataset: {DATASET}
    target: {{command: "bot {{input_file}} {{output_file}}"}}
    assertions: [{{type: equals}}]
    gate:
{gate}""")


def lines(*rows: dict[str, object]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


CHECKS = (AssertionSpec("equals"),)


def run(text: str, wrong: frozenset[str] = frozenset()) -> RunResult:
    """Parse ``text`` as the dataset and score every example (outputs "nope" for ``wrong``)."""
    items = [Item(e, TargetOutput("nope" if e.input in wrong else e.input))
             for e in parse_dataset(text, DATASET)]
    settings = Settings(20.0, 1)
    results = tuple(asyncio.run(score_items(CHECKS, items, Path("."), settings,
                                            RunState(settings).caller, DATASET)))
    return RunResult("sha", {"s": SuiteResult("s", DATASET, results, suite_metrics(results))})


def row(word: str, *, with_id: bool = True) -> dict[str, object]:
    found: dict[str, object] = {"input": word, "expected": word}
    return {"id": word, **found} if with_id else found


IDS = lines(*(row(w) for w in ("alpha", "bravo", "charlie", "delta")))
NO_ID_AT_3 = lines(row("alpha"), row("bravo"), row("charlie", with_id=False), row("delta"))


def test_the_parser_marks_ids_taken_from_the_line() -> None:
    text = lines({"id": 1, "input": "a"}, {"input": "b"}, {"id": None, "input": "c"},
                 {"id": "d", "input": "d"})
    found = [(e.id, e.line, e.id_from_line) for e in parse_dataset(text, DATASET)]
    assert found == [("1", 1, False), ("2", 2, True), ("3", 3, True), ("d", 4, False)]
    assert [r.id_from_line for r in run(text).suites["s"].examples] == [False, True, True, False]


@pytest.mark.parametrize(("gate", "rules"), [
    ("      pass_rate: {regression: {alpha: 0.05}}\n", "pass_rate: regression"),
    ("      pass_rate: {non_inferiority_margin: 0.05}\n", "pass_rate: non_inferiority_margin"),
    ("      pass_rate: {max_new_failures: 0, min: 0.5}\n", "pass_rate: max_new_failures"),
    ("      pass_rate: {min_detectable: 0.1}\n", "pass_rate: min_detectable"),
    ("      critical: {tag: must_pass}\n", "critical"),
    ("      pass_rate: {regression: {alpha: 0.05}, max_new_failures: 1}\n"
     "      error_rate: {max_increase: 0.1}\n      critical: {tag: must_pass}\n",
     "pass_rate: regression; pass_rate: max_new_failures; critical"),
])
def test_a_head_example_without_id_fails_closed_naming_file_and_line(gate: str,
                                                                     rules: str) -> None:
    report = compare(config(gate), run(NO_ID_AT_3), run(IDS))
    assert (report.conclusion, report.outcomes) == ("failure", ())
    err = report.config_error
    assert err is not None and (err.path, err.line) == (DATASET, 3)
    assert str(err) == (f"{DATASET}:3: line 3 has no `id`, but suite s gates with rules that "
                        f"pair base and head example by example ({rules}), {FIX}")


def test_it_fails_closed_without_a_base_too() -> None:
    report = compare(config("      critical: {tag: must_pass}\n"), run(NO_ID_AT_3), None)
    assert report.config_error is not None and report.config_error.line == 3


def test_a_shifted_line_would_have_paired_the_wrong_examples() -> None:
    """Base has no ids; head inserts one example on top: every line id now names another one."""
    base_text = lines(*(row(w, with_id=False) for w in ("alpha", "bravo", "charlie")))
    head_text = lines(row("new", with_id=False), *(row(w, with_id=False)
                                                   for w in ("alpha", "bravo", "charlie")))
    gate = "      pass_rate: {max_new_failures: 0}\n"
    report = compare(config(gate), run(head_text, frozenset({"alpha"})), run(base_text))
    assert report.config_error is not None and report.config_error.line == 1


def test_a_base_without_ids_leaves_paired_rules_undecided_for_a_writer_to_let_through(
        ) -> None:
    """The fix (ids added at head) cannot be judged by base's paired rules: undecided, so it
    blocks until a writer lets it through (issue 12: a passing ``neutral`` was the default)."""
    base_text = lines(*(row(w, with_id=False) for w in ("alpha", "bravo", "charlie", "delta")))
    gate = "      pass_rate: {min: 0.5, regression: {alpha: 0.05}, max_new_failures: 0}\n"
    report = compare(config(gate), run(IDS, frozenset({"bravo"})), run(base_text))
    assert report.config_error is None
    assert [(o.rule, o.status, o.effect) for o in report.outcomes] == [
        ("min 0.50", "pass", "none"),
        ("regression alpha 0.05", "inconclusive", "undecided"),
        ("max_new_failures 0", "inconclusive", "undecided")]
    assert report.outcomes[1].reason == (
        "base and head are not paired example by example: the base dataset evals/s.jsonl has "
        "no `id` at line 1 (the paired rules apply once ids are merged); the run is undecided "
        "(no on_inconclusive in the base config)")
    assert report.conclusion == "action_required" and report.comparisons == ()


def _absolute(head: str, base: str, wrong: frozenset[str] = frozenset()) -> GateReport:
    return compare(config("      pass_rate: {min: 0.7, max_drop: 0.2}\n"),
                   run(head, wrong), run(base))


def test_line_ids_still_work_for_min_and_max_drop_without_paired_statistics() -> None:
    no_ids = lines(*(row(w, with_id=False) for w in ("alpha", "bravo", "charlie", "delta")))
    report = _absolute(no_ids, no_ids, frozenset({"bravo"}))
    assert report.config_error is None
    assert [(o.rule, o.status, o.head, o.base) for o in report.outcomes] == [
        ("min 0.70", "pass", 0.75, 1.0), ("max_drop 0.20", "fail", 0.75, 1.0)]
    assert report.comparisons == ()
    assert report.notes == (
        "s: base and head are not paired example by example: the base dataset evals/s.jsonl "
        "has no `id` at line 1, so no paired statistics are shown; give every example an `id` "
        "to see them",)
    head_only = _absolute(NO_ID_AT_3, IDS)
    assert head_only.notes[0].startswith("s: base and head are not paired example by example: "
                                         "the head dataset evals/s.jsonl has no `id` at line 3")
    paired = _absolute(IDS, IDS)
    assert (paired.notes, len(paired.comparisons)) == ((), 1)


def test_calibration_refuses_line_ids_under_paired_rules() -> None:
    cfg = config("      pass_rate: {max_new_failures: 0}\n")
    with pytest.raises(ConfigError) as caught:
        summarize(cfg, [run(NO_ID_AT_3), run(NO_ID_AT_3)])
    assert (caught.value.path, caught.value.line) == (DATASET, 3)


@pytest.mark.slow
async def test_gate_trees_reports_the_missing_id_as_a_config_error(tmp_path: Path) -> None:
    python = shlex.quote(sys.executable)
    trees = []
    for name, text in (("base", IDS), ("head", NO_ID_AT_3)):
        root = tmp_path / name
        (root / "evals").mkdir(parents=True)
        (root / DATASET).write_text(text)
        (root / "bot.py").write_text("import json, sys\njson.dump({'output': json.load(open("
                                     "sys.argv[1]))['input']}, open(sys.argv[2], 'w'))\n")
        (root / ".llmgate.yml").write_text(
            f"version: 1\nsuites:\n  - name: s\n    dataset: {DATASET}\n"
            f"    target: {{command: \"{python} bot.py {{input_file}} {{output_file}}\"}}\n"
            "    assertions: [{type: equals}]\n"
            "    gate:\n      pass_rate: {regression: {alpha: 0.05}}\n")
        trees.append(root)
    report = await gate_trees(trees[1], trees[0])
    assert report.conclusion == "failure" and report.config_error is not None
    assert str(report.config_error).startswith(f"{DATASET}:3: line 3 has no `id`")
