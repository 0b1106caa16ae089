"""`worker.pipeline.trees.gate_trees` on real directories: what a missing or broken side does.

Both the worker and ``llmgate run`` call it, so these are the behaviours both share. The trees
hold the four-example echo suite of `worker_support` and run its real target command.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.worker_support import ASSERTION_LINE, CONFIG, DATASET, ECHO
from worker.pipeline.trees import gate_trees


def tree(root: Path, *, config: str | None = CONFIG, dataset: str = DATASET,
         broken_word: str = "") -> Path:
    """Write one checkout of the echo repository; ``broken_word`` makes the target garble it."""
    (root / "evals").mkdir(parents=True)
    (root / "echo.py").write_text(ECHO.replace('BROKEN = ""', f"BROKEN = {broken_word!r}"))
    (root / "evals" / "echo.jsonl").write_text(dataset)
    if config is not None:
        (root / ".llmgate.yml").write_text(config)
    return root


def statuses(report) -> dict[str, str]:
    return {o.rule: o.status for o in report.outcomes}


async def test_base_and_head_are_compared(tmp_path):
    head = tree(tmp_path / "head", broken_word="bravo")
    report = await gate_trees(head, tree(tmp_path / "base"), head_sha="h" * 40,
                              base_sha="b" * 40)
    assert report.conclusion == "failure"
    assert statuses(report) == {"min 0.50": "pass", "max_drop 0.05": "fail"}
    assert [r.example_id for r in report.regressions] == ["bravo"]
    assert (report.head.sha, report.base.sha) == ("h" * 40, "b" * 40)


async def test_no_config_at_base_skips_only_the_relative_rules(tmp_path):
    head = tree(tmp_path / "head", broken_word="bravo")
    report = await gate_trees(head, tree(tmp_path / "base", config=None))
    assert report.conclusion == "success"
    assert statuses(report) == {"min 0.50": "pass", "max_drop 0.05": "skipped"}
    assert "no .llmgate.yml at base: relative rules skipped" in report.notes
    assert report.base is None


async def test_broken_config_at_base_is_undecided_not_a_config_error(tmp_path):
    """Base cannot be evaluated: not head's error, but no pass either (issue 12: it passed)."""
    base = tree(tmp_path / "base", config=CONFIG.replace("type: equals", "type: equalz"))
    head = tree(tmp_path / "head", config=CONFIG.replace("  concurrency: 4\n",
                                                         "  concurrency: 4\n"
                                                         "  undecided: neutral\n"))
    report = await gate_trees(head, base)  # head cannot make a broken base neutral
    assert report.config_error is None and report.conclusion == "action_required"
    assert report.headline.startswith("undecided: base could not be evaluated (its config is "
                                      f"invalid: .llmgate.yml:{ASSERTION_LINE}: ")
    assert statuses(report)["max_drop 0.05"] == "skipped"
    [note] = [n for n in report.notes if n.startswith("base could not be evaluated")]
    assert f".llmgate.yml:{ASSERTION_LINE}" in note


async def test_broken_dataset_at_head_is_a_config_error_with_its_line(tmp_path):
    lines = DATASET.splitlines()
    lines[2] = '{"id": "charlie", "input": '  # line 3 cut short
    head = tree(tmp_path / "head", dataset="\n".join(lines) + "\n")
    report = await gate_trees(head, tree(tmp_path / "base"))
    assert report.conclusion == "failure"
    assert (report.config_error.path, report.config_error.line) == ("evals/echo.jsonl", 3)


@pytest.mark.parametrize(("config_path", "message"), [
    ("../escape.yml", "the config path must stay inside the repository"),
    ("ci/missing.yml", "no ci/missing.yml at head: add one to gate"),
])
async def test_config_path_problems_are_config_errors(tmp_path, config_path, message):
    (tmp_path / "escape.yml").write_text(CONFIG)
    report = await gate_trees(tree(tmp_path / "head"), None, config_path=config_path)
    assert report.conclusion == "failure"
    assert report.config_error.message == message


async def test_config_in_a_subdirectory(tmp_path):
    head = tree(tmp_path / "head", config=None)
    (head / "ci").mkdir()
    (head / "ci" / "gate.yml").write_text(CONFIG)
    report = await gate_trees(head, None, config_path="ci/gate.yml")
    assert report.config_error is None and report.conclusion == "success"
    assert report.head.suites["echo"].metrics["pass_rate"] == 1.0


async def test_a_config_in_a_subdirectory_that_is_not_utf8_is_an_error_on_its_line(tmp_path):
    """It used to be read with ``read_text``: a UnicodeDecodeError escaped as a crash."""
    head = tree(tmp_path / "head", config=None)
    (head / "ci").mkdir()
    (head / "ci" / "gate.yml").write_bytes(CONFIG.encode() + b"# caf\xe9\n")
    report = await gate_trees(head, None, config_path="ci/gate.yml")
    assert report.conclusion == "failure"
    line = CONFIG.count("\n") + 1
    assert (report.config_error.path, report.config_error.line) == ("ci/gate.yml", line)
    assert report.config_error.message.startswith("not UTF-8 text at byte 6 of the line")


async def test_missing_dataset_points_at_the_suite_line_of_the_config(tmp_path: Path) -> None:
    """A missing dataset is not in the PR's diff: the error points at the config line naming it."""
    (tmp_path / ".llmgate.yml").write_text(
        "version: 1\nsuites:\n  - name: s\n    dataset: evals/nope.jsonl\n"
        "    target:\n      command: python3 t.py {input_file} {output_file}\n"
        "    assertions: [{type: equals}]\n")
    report = await gate_trees(tmp_path, None)
    err = report.config_error
    assert err is not None
    assert (err.path, err.line) == (".llmgate.yml", 3)
    assert "evals/nope.jsonl" in err.message and "suite s" in err.message
