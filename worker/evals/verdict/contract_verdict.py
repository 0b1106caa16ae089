"""Put head's verdict under its own evaluation contract beside the gate's (pure but one read).

The gate's verdict is head's target on base's contract (worker/evals/verdict/contract.py); where
head changes the contract, head's own verdict is computed too. `combine` merges the two: the
stricter decides (head's own failing fails the check; base's failing is never made a pass by head's
own passing: the headline says it passes only under head's changed contract, and a writer can Accept
regression), and every piece of head's own verdict is shown under the suite name `OWN_SUITE`.
`at_head_lines` moves the verdict's examples (base's dataset lines) to head's dataset lines for
annotations. `contract_line` is the report's sentence per suite.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from worker.errors import ConfigError
from worker.evals.config import load_suite_dataset
from worker.evals.types import (
    Config,
    ContractChange,
    GateReport,
    PairedComparison,
    Regression,
    RuleOutcome,
    RunError,
    SuiteComparability,
    SuiteConfig,
)
from worker.evals.verdict.contract import describe

#: How an outcome under head's own contract is named (shown for information).
OWN_SUITE = "{suite} (head's contract)"
_PASSING = ("success", "neutral")


def combine(report: GateReport, own: GateReport,
            changes: Mapping[str, tuple[str, ...]]) -> GateReport:
    """Put head's verdict under its own contract beside the gate's (see the module docstring).

    Args:
        report: the verdict of head's target on base's contract (finished:
            worker/evals/verdict/health.py).
        own: the finished verdict of head's own contract for the suites in ``changes``.
        changes: suite -> the contract components head changes.

    Returns:
        ``report`` with `ContractChange` entries, own's outcomes, paired comparisons and
        comparability named `OWN_SUITE`, its errors and errored examples added; ``failure``
        when own fails; when only base's contract fails, a headline saying that it passes
        only under head's. A configuration
        error of head's own contract (e.g. a duplicated id in head's dataset) is the report.
    """
    if own.config_error is not None:
        return replace(own, head=report.head)
    entries = tuple(_entry(name, parts, report, own) for name, parts in changes.items())
    conclusion, headline = report.conclusion, report.headline
    if conclusion == "failure" and own.conclusion in _PASSING:
        headline = "; ".join(h for h in (headline, only_under_head(entries)) if h)
    elif own.conclusion == "failure" and conclusion != "failure":
        conclusion = "failure"
        headline = f"fails under head's own evaluation contract: {_why(own)}"
    return replace(report, conclusion=conclusion, headline=headline,
                   outcomes=(*report.outcomes, *_named(own.outcomes)), contract=entries,
                   comparisons=(*report.comparisons, *_named(own.comparisons)),
                   comparability=(*report.comparability, *_named(own.comparability)),
                   errors=_more_errors(report.errors, own.errors),
                   errored=_more_examples(report.errored, own.errored))


_Named = TypeVar("_Named", RuleOutcome, PairedComparison, SuiteComparability)


def _named(items: tuple[_Named, ...]) -> tuple[_Named, ...]:
    """``items`` of head's own contract, their suite named `OWN_SUITE`."""
    return tuple(replace(i, suite=OWN_SUITE.format(suite=i.suite)) for i in items)


def only_under_head(entries: tuple[ContractChange, ...]) -> str:
    """The headline of a head that fails base's contract and passes its own."""
    names = "; ".join(f"{e.suite}: {describe(e.changes)}" for e in entries)
    return (f"passes only under head's changed evaluation contract ({names}): base's contract "
            "decides until the change is merged; a writer can accept the regression")


def contract_line(change: ContractChange) -> str:
    """One sentence for the report: what head changes, and its verdict under its own."""
    counts = [f"{len(ids)} example{'s' if len(ids) != 1 else ''} {what}"
              for ids, what in ((change.added, "only at head"), (change.removed, "only at base"))
              if ids]
    extra = f"; {', '.join(counts)}" if counts else ""
    verdict = {"success": "would pass", "neutral": "would be neutral",
               "failure": "fails too"}.get(change.conclusion, "is undecided")
    rate = change.metrics.get("pass_rate")
    shown = f"pass_rate {rate:.3f}, " if rate is not None else ""
    why = f": {change.headline}" if change.headline else ""
    return (f"{change.suite}: head changes the evaluation contract ({describe(change.changes)}"
            f"{extra}). The gate scored head's target on base's contract; under head's own it "
            f"{verdict} ({shown}{change.regressions} regressed{why}). Head's contract applies "
            "once the change is merged.")


def _entry(name: str, parts: tuple[str, ...], report: GateReport,
           own: GateReport) -> ContractChange:
    head = own.head.suites.get(name) if own.head is not None else None
    base = report.base.suites.get(name) if report.base is not None else None
    head_ids = {e.id: None for e in head.examples} if head is not None else {}
    base_ids = {e.id: None for e in base.examples} if base is not None else {}
    return ContractChange(
        name, parts, tuple(i for i in head_ids if i not in base_ids),
        tuple(i for i in base_ids if i not in head_ids), own.conclusion, own.headline,
        dict(head.metrics) if head is not None else {},
        sum(r.suite == name for r in own.regressions))


def _why(own: GateReport) -> str:
    if own.headline:
        return own.headline
    failed = next((o for o in own.outcomes if o.status in ("fail", "regression")), None)
    if failed is not None:
        return f"{failed.suite} {failed.metric} {failed.rule}: {failed.reason}"
    return f"{len(own.regressions)} examples regressed"


def _more_errors(errors: tuple[RunError, ...],
                 more: tuple[RunError, ...]) -> tuple[RunError, ...]:
    seen = {(e.side, e.suite, e.kind, e.permanent, e.cause) for e in errors}
    return (*errors, *(e for e in more
                       if (e.side, e.suite, e.kind, e.permanent, e.cause) not in seen))


def _more_examples(found: tuple[Regression, ...],
                   more: tuple[Regression, ...]) -> tuple[Regression, ...]:
    seen = {(r.suite, r.example_id) for r in found}
    return (*found, *(r for r in more if (r.suite, r.example_id) not in seen))


def at_head_lines(report: GateReport, gating: Config, head: Config,
                  head_root: Path) -> GateReport:
    """Point the report's examples of suites run on base's contract at head's dataset.

    Those examples are base's (their lines are base's dataset's); an annotation goes on
    head's file, so each takes its path and line in head's dataset; one deleted at head keeps
    base's line, and its reason says so.

    Args:
        report: the finished report.
        gating: the config the verdict ran (`gating_config`).
        head, head_root: head's config and checkout.
    """
    on_base = {s.name for s in gating.suites if s.contract_root is not None}
    lines = {s.name: (s.dataset, _lines(head_root, s)) for s in head.suites
             if s.name in on_base}

    def moved(item: Regression) -> Regression:
        found = lines.get(item.suite)
        if found is None:
            return item
        dataset, at = found
        if item.example_id in at:
            return replace(item, dataset=dataset, line=at[item.example_id])
        return replace(item, dataset=dataset, reason=f"{item.reason} (the example is deleted "
                       f"at head; line {item.line} of base's dataset)")

    return replace(report, regressions=tuple(moved(r) for r in report.regressions),
                   errored=tuple(moved(r) for r in report.errored))


def _lines(root: Path, suite: SuiteConfig) -> dict[str, int]:
    try:
        return {e.id: e.line for e in load_suite_dataset(root, suite)}
    except ConfigError:
        return {}
