"""Decide what provider trouble, judge errors and budgets do to a gate verdict (pure).

After the rules are checked (worker/evals/gate.py), in this order:

1. A run that stopped early or did not start (``max_cost_usd``, ``max_duration``, or an
   estimate above the budget) makes the check ``neutral``: the gate could not decide. The
   headline says why and how far the run got.
2. When the share of examples whose calls failed for the provider's reasons (429 after retries,
   5xx, timeouts) exceeds ``settings.max_provider_error_rate`` at head or base, the check is
   ``neutral`` ("rate limited" when most were 429s): never a regression, never a pass.
3. When the share of examples with a judge error (an errored assertion) exceeds
   ``settings.max_judge_error_rate``, a ``success`` becomes ``failure``: fail closed.

Unscored examples (provider or judge errors) are never listed as regressions. Judge errors are
always counted in the notes ("4 judge errors"), and a judge rubric changed between base and
head is noted (the scores are then not comparable).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from worker.evals.types import Config, GateReport, RunResult, SuiteResult

PROVIDER_KINDS = ("rate_limited", "provider", "timeout")


def finish_report(report: GateReport, config: Config) -> GateReport:
    """Apply the rules of the module docstring to a compared report."""
    if report.config_error is not None or report.head is None:
        return report
    runs = {"head": report.head, "base": report.base}
    notes = list(report.notes)
    unscored = {(r.suite, r.example_id) for r in report.regressions
                if _unscored(report.head, r.suite, r.example_id)}
    regressions = tuple(r for r in report.regressions if (r.suite, r.example_id) not in unscored)
    notes += _judge_notes(runs) + _rubric_notes(report.head, report.base)
    conclusion, headline = report.conclusion, report.headline
    stopped = [(side, run) for side, run in runs.items() if run is not None and run.stopped]
    provider = _worst_share(runs, _provider_errors)
    judges = _worst_share(runs, _judge_errors)
    if stopped:
        side, run = stopped[0]
        conclusion, headline = "neutral", f"{run.stopped} at {side} ({_progress(run)})"
    elif provider[0] > config.settings.max_provider_error_rate:
        conclusion, headline = "neutral", _provider_headline(runs, provider)
    elif judges[0] > config.settings.max_judge_error_rate and conclusion == "success":
        conclusion = "failure"
        headline = (f"{judges[1]} judge errors at {judges[2]} ({judges[0]:.0%} of examples, "
                    f"allowed {config.settings.max_judge_error_rate:.0%})")
    return replace(report, conclusion=conclusion, regressions=regressions,
                   notes=tuple(notes), headline=headline)


def _unscored(run: RunResult, suite: str, example_id: str) -> bool:
    result = run.suites.get(suite)
    return result is not None and any(
        e.unscored for e in result.examples if e.id == example_id)


def _provider_errors(suite: SuiteResult) -> int:
    return sum(e.error_kind in PROVIDER_KINDS for e in suite.examples)


def _judge_errors(suite: SuiteResult) -> int:
    return sum(any(a.errored for a in e.assertions) for e in suite.examples)


def _worst_share(runs: dict[str, RunResult | None],
                 count: Callable[[SuiteResult], int]) -> tuple[float, int, str]:
    """Return (share, count, side) of the side with the largest share of ``count``."""
    worst = (0.0, 0, "head")
    for side, run in runs.items():
        if run is None:
            continue
        total = sum(len(s.examples) for s in run.suites.values())
        found = sum(count(s) for s in run.suites.values())
        if total and found / total > worst[0]:
            worst = (found / total, found, side)
    return worst


def _provider_headline(runs: dict[str, RunResult | None], worst: tuple[float, int, str]) -> str:
    run = runs[worst[2]]
    assert run is not None
    total = sum(len(s.examples) for s in run.suites.values())
    limited = sum(e.error_kind == "rate_limited" for s in run.suites.values()
                  for e in s.examples)
    what = "rate limited" if limited * 2 >= worst[1] else "provider errors"
    return (f"{what}: {worst[1]} of {total} examples got no answer at {worst[2]} "
            "(the gate cannot decide; re-run later)")


def _progress(run: RunResult) -> str:
    examples = [e for s in run.suites.values() for e in s.examples]
    if not examples:
        return "no example ran"
    done = sum(e.error_kind != "budget" for e in examples)
    return f"{done} of {len(examples)} examples ran, ${run.spend.cost_usd:.4f} spent"


#: Longest errored-assertion message quoted in a note, characters.
MAX_QUOTED_CHARS = 300


def _judge_notes(runs: dict[str, RunResult | None]) -> list[str]:
    """One note a side with errored assertions: how many, and the first one's message (so a
    reason that every example shares, e.g. a local embedding model the worker refused, is
    visible without opening each example)."""
    notes = []
    for side, run in runs.items():
        if run is None:
            continue
        count = sum(_judge_errors(s) for s in run.suites.values())
        if not count:
            continue
        first = next((f"{name}/{e.id}: {a.type}: {a.message}"
                      for name, suite in run.suites.items() for e in suite.examples
                      for a in e.assertions if a.errored), "")
        if len(first) > MAX_QUOTED_CHARS:
            first = first[:MAX_QUOTED_CHARS - 1] + "…"
        notes.append(f"{count} judge error{'s' if count != 1 else ''} at {side} (a judge or "
                     "embedding call failed, or a judge reply had no verdict): those examples "
                     f"are unscored; the first: {first}")
    return notes


def _rubric_notes(head: RunResult, base: RunResult | None) -> list[str]:
    if base is None:
        return []
    return [f"{name}: the judge prompt changed between base and head "
            f"({', '.join(base.suites[name].judge_versions)} -> "
            f"{', '.join(suite.judge_versions)}): judge scores are not comparable"
            for name, suite in head.suites.items()
            if name in base.suites and base.suites[name].judge_versions
            and suite.judge_versions != base.suites[name].judge_versions]
