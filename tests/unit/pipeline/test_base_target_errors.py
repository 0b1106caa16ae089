"""A base whose command target cannot answer is not a failing base (`gate_trees` on real trees).

A security tester's pull request left a detached helper process behind from head's command
target; it lowered the file-size rlimit of base's target processes, so every base example
crashed ("no output file") and counted as a base failure: base 0.000 against head 0.750, and
the regression passed (exit 0). Here base's own target lowers its limit the same way
(`SABOTAGED`), so the effect is the helper's without a process outliving the test. Base's
target errors are now outside the pull request (worker/evals/verdict/base_targets.py):
those examples have no verdict at base, the run is undecided above base's
``max_provider_error_rate`` (never ``neutral``), and noted below it.
"""

from __future__ import annotations

from pathlib import Path

from tests.unit.worker_support import write_tickets_tree
from worker.pipeline.trees import gate_trees

#: The target: answers the input; ``BROKEN`` inputs get a wrong answer, ``CRASH`` ones a
#: file-size limit of 0 bytes first (what the helper did), so writing its output fails.
BOT = """import json, resource, sys
BROKEN, CRASH = {broken!r}, {crash!r}
example = json.load(open(sys.argv[1]))
text = example["input"]
if CRASH == "*" or text in CRASH:
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    print("sabotaged: the file-size limit is 0", file=sys.stderr)
with open(sys.argv[2], "w") as out:
    out.write(json.dumps({{"output": "nope" if text in BROKEN else text}}))
"""
GATE = "      pass_rate: {min: 0.5, max_drop: 0.01}\n"
WORDS = ("alpha", "bravo", "charlie", "delta")


def rows(words: tuple[str, ...]) -> list[dict[str, str]]:
    return [{"id": w, "input": w, "expected": w} for w in words]


def tree(root: Path, words: tuple[str, ...], *, broken: tuple[str, ...] = (),
         crash: tuple[str, ...] | str = (), settings: str = "", gate: str = GATE) -> Path:
    found = write_tickets_tree(root, rows(words), BOT.format(broken=broken, crash=crash), gate)
    if settings:
        config = found / ".llmgate.yml"
        config.write_text(config.read_text().replace("version: 1\n",
                                                     f"version: 1\nsettings:\n{settings}"))
    return found


async def test_a_base_whose_target_crashes_everywhere_leaves_the_run_undecided(tmp_path):
    """The tester's case: before, base 0.000 < head 0.750 and the check was ``success``."""
    head = tree(tmp_path / "head", WORDS, broken=("bravo",))  # a real regression: 0.75
    base = tree(tmp_path / "base", WORDS, crash="*")
    report = await gate_trees(head, base, head_sha="h" * 40, base_sha="b" * 40)
    assert report.conclusion == "action_required"
    assert report.headline.startswith(
        "undecided: base could not run: target errors (base's target crashed, exited "
        "non-zero, timed out or wrote no valid output): 4 of 4 examples got no answer at base "
        "(the first, tickets/alpha: the command exited with status 1")
    assert "sabotaged: the file-size limit is 0" in report.headline
    assert "never neutral" in report.headline
    base_suite = report.base.suites["tickets"]
    assert all(e.unscored and e.errored for e in base_suite.examples)
    assert "pass_rate" not in base_suite.metrics  # not 0.0: base has no verdict
    [error] = [e for e in report.errors if e.side == "base"]
    assert (error.kind, error.cause, error.count) == ("target", "outside", 4)
    assert any(n.startswith("4 of 4 example results at base got no answer from base's target")
               for n in report.notes)


async def test_base_settings_undecided_neutral_does_not_pass_base_target_errors(tmp_path):
    """A repository that lets outages pass (``undecided: neutral``) must not let this pass:
    a pull request's own process can make base's target fail."""
    neutral = "  undecided: neutral\n"
    head = tree(tmp_path / "head", WORDS, broken=("bravo",), settings=neutral)
    base = tree(tmp_path / "base", WORDS, crash="*", settings=neutral)
    report = await gate_trees(head, base)
    assert report.conclusion == "action_required"
    assert "target errors" in report.headline and "never neutral" in report.headline


async def test_a_few_base_target_errors_are_noted_and_left_out_of_the_comparison(tmp_path):
    words = tuple(f"w{i}" for i in range(20))
    head = tree(tmp_path / "head", words)
    base = tree(tmp_path / "base", words, crash=("w3",))  # 1 of 20: within 10%
    report = await gate_trees(head, base)
    assert report.conclusion == "success"
    [note] = [n for n in report.notes if "got no answer from base's target" in n]
    assert note.startswith("1 of 20 example result at base got no answer from base's target")
    assert "the first, tickets/w3: the command exited with status 1" in note
    assert "sabotaged" in note
    assert "not counted as base failures" in note
    base_suite = report.base.suites["tickets"]
    assert base_suite.metrics["pass_rate"] == 1.0  # 19 of 19 scored, not 19 of 20
    assert base_suite.metrics["error_rate"] == 0.0
    [w3] = [e for e in base_suite.examples if e.id == "w3"]
    assert w3.unscored and w3.error_kind == "target"


async def test_a_head_target_error_is_still_a_failure_of_the_head(tmp_path):
    """Only base's target errors change meaning: head's crash fails its example."""
    words = tuple(f"w{i}" for i in range(20))
    head = tree(tmp_path / "head", words, crash=("w3",))
    base = tree(tmp_path / "base", words)
    report = await gate_trees(head, base)
    assert report.conclusion == "failure"
    assert [r.example_id for r in report.regressions] == ["w3"]
    assert not [n for n in report.notes if "got no answer from base's target" in n]


async def test_under_the_allowance_base_cannot_crash_exactly_where_head_regresses(tmp_path):
    """The targeted form of the attack: base crashes on the one example head regresses (1 of
    20, within 10%) and the metric's rule tolerates one failure in 20. Left out of the pairing
    it would pass; the gate cannot tell."""
    words, tolerant = tuple(f"w{i}" for i in range(20)), "      pass_rate: {max_drop: 0.06}\n"
    head = tree(tmp_path / "head", words, broken=("w3",), gate=tolerant)
    base = tree(tmp_path / "base", words, crash=("w3",), gate=tolerant)
    report = await gate_trees(head, base)
    assert report.conclusion == "action_required"
    assert report.headline.startswith("undecided: base's target gave no answer for 1 example "
                                      "that fails at head (tickets/w3)")
