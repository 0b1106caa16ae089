"""A base run whose target gave no answer is never stored as a baseline, nor reused.

The security tester's case: a pull request's leftover process made every base example's
command target crash; with ``--baseline-store`` that sabotaged base was stored as complete
(only unscored examples were refused) and a later run, the helper gone, still passed by
reusing it. `StoredBaselines` on a real tree and a `DirectoryStore`; the target crashes while
``SABOTAGE_BASE`` is set (it lowers its own file-size limit to 0, as the helper did).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tests.unit.baseline_support import Counter
from worker.baselines.local import DirectoryStore
from worker.baselines.reuse import Origin, StoredBaselines, incomplete
from worker.baselines.store import Baseline
from worker.evals.context import EvalContext
from worker.evals.types import ExampleResult, SuiteResult
from worker.pipeline.config_file import read_config

SHA = "ba" * 20
BOT = """import json, os, resource, sys
if os.environ.get("SABOTAGE_BASE"):
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
example = json.load(open(sys.argv[1]))
with open(sys.argv[2], "w") as out:
    out.write(json.dumps({"output": example["input"]}))
"""
CONFIG = """version: 1
settings:
  env: [SABOTAGE_BASE]
suites:
  - name: tickets
    dataset: evals/t.jsonl
    target:
      command: python3 bot.py {input_file} {output_file}
    assertions:
      - type: equals
"""
WHY = "3 examples without an answer from the target (it crashed, exited non-zero, timed out " \
      "or wrote no valid output)"


def tree(root: Path) -> Path:
    (root / "evals").mkdir(parents=True)
    (root / "evals" / "t.jsonl").write_text("".join(
        json.dumps({"id": w, "input": w, "expected": w}) + "\n" for w in ("a", "b", "c")))
    (root / "bot.py").write_text(BOT)
    (root / ".llmgate.yml").write_text(CONFIG)
    return root


def runner(store: DirectoryStore) -> StoredBaselines:
    return StoredBaselines(store, "acme/bot", Origin("pull_request", pr_number=7))


async def test_a_base_whose_target_crashed_is_not_stored(tmp_path, monkeypatch):
    root, store = tree(tmp_path / "base"), DirectoryStore(tmp_path / "store")
    config = read_config(root)
    monkeypatch.setenv("SABOTAGE_BASE", "1")
    first = runner(store)
    base = await first(config, root, SHA, EvalContext())
    assert all(e.error_kind == "target" for e in base.result.suites["tickets"].examples)
    assert first.not_stored == {"tickets": WHY}
    assert base.source == f"compared with {SHA[:7]} (base run now, not stored: tickets: {WHY})"
    assert await store.get("acme/bot", SHA, first.keys["tickets"]) is None
    monkeypatch.delenv("SABOTAGE_BASE")  # the helper is gone: the next run runs base again
    counter = Counter()
    second = runner(store)
    again = await second(config, root, SHA, EvalContext.of(on_call=counter))
    assert counter.examples == 3
    assert again.result.suites["tickets"].metrics["pass_rate"] == 1.0
    assert again.source.endswith("base run now, stored for later pull requests)")


async def test_a_stored_baseline_with_target_errors_is_not_reused(tmp_path, monkeypatch):
    """A record stored before the rule held (the tester's third run reused it)."""
    root, store = tree(tmp_path / "base"), DirectoryStore(tmp_path / "store")
    config = read_config(root)
    monkeypatch.setenv("SABOTAGE_BASE", "1")
    first = runner(store)
    sabotaged = (await first(config, root, SHA, EvalContext())).result.suites["tickets"]
    key = first.keys["tickets"]
    assert await store.put(Baseline("acme/bot", SHA, key, sabotaged, "pull_request",
                                    pr_number=6)) is None
    monkeypatch.delenv("SABOTAGE_BASE")
    counter = Counter()
    second = runner(store)
    base = await second(config, root, SHA, EvalContext.of(on_call=counter))
    assert counter.examples == 3  # base ran again: the stored record was refused
    assert base.result.suites["tickets"].metrics["pass_rate"] == 1.0
    assert base.source == (f"compared with {SHA[:7]} (stored baseline not reused: tickets: "
                           f"{WHY}; base run now, stored for later pull requests)")
    stored = await store.get("acme/bot", SHA, key)  # replaced by the complete run
    assert stored is not None and incomplete(stored.result) is None


@pytest.mark.parametrize(("kind", "why"), [
    ("target", "2 examples without an answer from the target (it crashed, exited non-zero, "
               "timed out or wrote no valid output)"),
    ("empty", None),  # the model's own empty answer is a failure base measured
])
def test_incomplete_names_target_errors(kind, why) -> None:
    row = ExampleResult("e1", 1, False, True, None, "y", error="boom", error_kind=kind)
    suite = SuiteResult("s", "d.jsonl", (row, replace(row, id="e2")), {})
    assert incomplete(suite) == why
