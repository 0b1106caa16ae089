"""`StoredBaselines` on a real tree and a real Redis: per-suite reuse, what is not stored, and
the report's sentence."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.unit.baseline_support import BOT, DATASET, Counter
from worker.baselines.reuse import Origin, StoredBaselines, describe, incomplete
from worker.baselines.store import BaselineSettings, BaselineStore
from worker.evals.context import EvalContext
from worker.evals.types import ExampleResult, RunResult, SuiteResult
from worker.pipeline.config_file import read_config

SHA = "b1" * 20
CONFIG = """version: 1
suites:
  - name: alpha
    dataset: evals/score.jsonl
    target:
      command: python3 bot.py {input_file} {output_file}
      batch: true
    assertions:
      - type: equals
  - name: beta
    dataset: evals/score.jsonl
    target:
      command: python3 bot.py {input_file} {output_file} beta
      batch: true
    assertions:
      - type: equals
"""


def tree(root: Path) -> Path:
    (root / "evals").mkdir(parents=True)
    (root / "evals" / "score.jsonl").write_text(DATASET)
    (root / "bot.py").write_text(BOT.format(passing=40))
    (root / ".llmgate.yml").write_text(CONFIG)
    return root


async def test_only_missing_suites_run_and_the_sentence_says_which(redis, tmp_path):
    root = tree(tmp_path / "base")
    config = read_config(root)
    store = BaselineStore(redis, BaselineSettings(ttl_s=600))
    counter = Counter()
    evals = EvalContext.of(on_call=counter)
    push = StoredBaselines(store, "acme/bot", Origin("push", branch="main"))
    alpha_only = replace(config, suites=config.suites[:1])
    await push(alpha_only, root, SHA, evals)
    assert counter.examples == 100
    pr = StoredBaselines(store, "acme/bot", Origin("pull_request", pr_number=9,
                                                   role="the merge base"))
    base = await pr(config, root, SHA, evals)
    assert counter.examples == 200  # beta ran, alpha was reused
    assert list(base.result.suites) == ["alpha", "beta"]
    assert base.result.suites["alpha"].metrics["pass_rate"] == 0.40
    assert base.result.suites["alpha"].spend.provider_calls == 0
    assert base.source.startswith(f"compared with {SHA[:7]}, the merge base (stored baseline "
                                  "for alpha from the push to main, ")
    assert base.source.endswith("; base run now for beta, stored for later pull requests)")
    again = await pr(config, root, SHA, evals)
    assert counter.examples == 200
    assert again.source.startswith(f"compared with {SHA[:7]}, the merge base (stored "
                                   "baselines from ")


def _suite(unscored: bool = False, stopped: str | None = None) -> SuiteResult:
    row = ExampleResult("e1", 1, False, False, "x", "y", unscored=unscored)
    return SuiteResult("s", "d.jsonl", (row, row), {}, stopped=stopped)


def test_incomplete_results_are_named() -> None:
    run = RunResult(SHA, {})
    assert incomplete(_suite(), run) is None
    assert incomplete(_suite(unscored=True), run) == \
        "2 examples unscored (provider or judge errors)"
    assert incomplete(_suite(stopped="max_cost_usd reached"), run) == \
        "the run stopped early (max_cost_usd reached)"
    assert incomplete(_suite(), RunResult(SHA, {}, stopped="max_duration reached")) == \
        "the run stopped early (max_duration reached)"


def test_the_sentence_when_nothing_could_be_stored() -> None:
    assert describe(SHA, "", {}, {"s": "2 examples unscored (provider or judge errors)"}) == (
        f"compared with {SHA[:7]} (base run now, not stored: s: 2 examples unscored "
        "(provider or judge errors))")
    assert describe(SHA, "", {}, {}) == f"compared with {SHA[:7]}"



GATED = CONFIG.replace("""      - type: equals
  - name: beta""", """      - type: equals
    gate:
      pass_rate: {regression: {alpha: 0.05}}
  - name: beta""")


async def test_stored_runs_of_other_commits_weigh_examples_never_the_base_itself(redis, tmp_path):
    root = tree(tmp_path / "base")
    (root / ".llmgate.yml").write_text(GATED)
    config = read_config(root)
    store = BaselineStore(redis, BaselineSettings(ttl_s=600))
    push = StoredBaselines(store, "acme/bot", Origin("push", branch="main"))
    earlier, base_sha = "e1" * 20, "e2" * 20
    await push(config, root, earlier, EvalContext())
    fresh = EvalContext()
    first = await StoredBaselines(store, "acme/bot", Origin("pull_request", pr_number=3))(
        config, root, base_sha, fresh)  # base runs now and is stored
    assert first.source.endswith("example weights also from stored runs of the unchanged "
                                 "suite at earlier commits (alpha: 1)")
    again = EvalContext()
    second = await StoredBaselines(store, "acme/bot", Origin("pull_request", pr_number=4))(
        config, root, base_sha, again)  # base's own record is in the store now: not read
    assert again.history == fresh.history
    assert second.source.endswith("(alpha: 1)")
    rows = fresh.history["alpha"]["pass_rate"]
    assert len(rows) == 100 and all(len(v) == 1 for v in rows.values())
    assert "beta" not in fresh.history  # no paired rule, no weights
