"""Score head's target on base's evaluation contract: a pull request cannot change its own test.

A suite's **evaluation contract** is what decides whether an output is good enough: its
dataset (the examples' ids, inputs, vars, expected values, tags, metadata and own
assertions), its assertions and the files they read (schemas, python functions), its judges
and embedding models (``settings.judge``/``embedding`` included) with their rubrics, its
traps, and its gate rules (worker/evals/rules.py) and run settings
(worker/evals/base_settings.py). What the pull request puts **under test** is the target: the
command, or the model, its parameters and prompt, and the code they run.

When base has a config that ran, the gate's verdict is that of head's target on base's
contract (`gating_config`): for a suite at both sides, head's target answers base's examples,
scored by base's assertions, judges and expected values, under base's settings; base's run
used the same contract, so nothing is re-scored. So a pull request that edits ``expected``,
deletes or renames the examples it fails, loosens an assertion, lowers a judge's bar or
points ``judge`` at a lenient model changes nothing its gate sees. An example of base that
head's target cannot run (a changed input format) fails at head (worker/evals/runner.py),
never drops out. A suite new at head brings its own contract (nothing at base to compare).

When head changes the contract of a suite (`contract_changes`), head's target is also scored
on head's own contract (its examples, assertions and judges; base re-scored with them as
worker/evals/comparability.py does), for information; `combine` puts that beside the verdict.
The stricter of the two decides: head's own contract failing fails the check too (a new
example that fails, a stricter assertion head does not meet); base's failing is never made a
pass by head's passing: the check fails, the report says that it passes only under head's
changed contract, and a writer can press "Accept regression" (worker/accept.py), the audited
way through. Examples added at head run only under head's contract, where the absolute rules
(``min``, ``max``, critical tags) and the relative ones see them, so they cannot dilute base's
examples in the verdict's means. Without a config at base (a repository adopting llmgate, or
a base that could not be evaluated), head's contract applies, as its rules do, noted.

Answers are shared: an example both contracts hold (same id, input and vars) is answered once
(`worker.evals.runner.RunState.answers`), and head's run under both contracts has one budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from worker.evals.dataset import load_dataset
from worker.evals.fingerprint import DESCRIPTIONS as PARTS
from worker.evals.fingerprint import digest, suite_fingerprint
from worker.evals.rules import merge_suite
from worker.evals.types import (
    Config,
    ConfigError,
    ContractChange,
    GateReport,
    PairedComparison,
    Regression,
    RuleOutcome,
    RunError,
    Settings,
    SuiteComparability,
    SuiteConfig,
)

#: The parts of a suite's contract compared between base and head, in report order: the
#: fingerprint's ``dataset_inputs`` and scoring components, and ``labels`` (tags, metadata).
COMPONENTS = ("dataset_inputs", "expected", "labels", "assertions", "assertion_files", "judges",
              "judge_prompts", "traps")
#: Each component in words.
DESCRIPTIONS = {**PARTS, "labels": "example tags or metadata"}
#: How an outcome under head's own contract is named (shown for information).
OWN_SUITE = "{suite} (head's contract)"
_PASSING = ("success", "neutral")


def gating_config(base: Config | None, head: Config, base_root: Path | None) -> Config:
    """Return the config the gate's verdict comes from: head's targets on base's contracts.

    Args:
        base: base's config, or None (none at base, invalid, or base could not run).
        head: head's config (its targets; its gate rules, merged with base's later).
        base_root: base's checkout (where base's datasets and scoring files are read).

    Returns:
        ``head`` itself without a base; else base's config (its settings and suites) where
        each suite at both sides runs head's target on base's dataset, assertions and traps
        (``contract_root`` = ``base_root``), carrying head's gate rules and config line; a
        suite only at head is head's. Suites only at base are not run (their rules still
        apply: worker/evals/rules.py).
    """
    if base is None or base_root is None:
        return head
    at_base = {s.name: s for s in base.suites}
    suites = tuple(_on_base(at_base[s.name], s, base_root) if s.name in at_base else s
                   for s in head.suites)
    return replace(base, suites=suites, path=head.path)


def _on_base(base: SuiteConfig, head: SuiteConfig, base_root: Path) -> SuiteConfig:
    return replace(base, target=head.target, line=head.line, gate=head.gate,
                   gate_options=head.gate_options, contract_root=base_root)


def contract_changes(base: Config, base_root: Path, head: Config,
                     head_root: Path) -> dict[str, tuple[str, ...]]:
    """Return suite name -> the `COMPONENTS` head changes, for each suite at both sides that
    has a change (reads both checkouts' files; never raises: an unreadable file is a change).

    Args:
        base, base_root: base's config and checkout.
        head, head_root: head's config (with its own ``judge``/``embedding``) and checkout.
    """
    at_base = {s.name: s for s in base.suites}
    found = {}
    for suite in head.suites:
        old = at_base.get(suite.name)
        if old is None:
            continue
        before = _components(old, base.settings, base_root)
        after = _components(suite, head.settings, head_root)
        parts = tuple(c for c in COMPONENTS if before[c] != after[c])
        if parts:
            found[suite.name] = parts
    return found


def _components(suite: SuiteConfig, settings: Settings, root: Path) -> dict[str, str]:
    fingerprint = suite_fingerprint(suite, settings, root)
    return {"dataset_inputs": fingerprint.outputs["dataset_inputs"], **fingerprint.scoring,
            "labels": _labels(root, suite.dataset)}


def _labels(root: Path, dataset: str) -> str:
    """Digest of every example's tags and metadata, in id order."""
    try:
        examples = load_dataset(root, dataset)
    except ConfigError as err:
        return digest(["unreadable", dataset, err.message])
    return digest(sorted([e.id, list(e.tags), e.metadata] for e in examples))


def own_rules(base: Config | None, own: Config) -> Config:
    """Return head's own-contract config with each suite's rules merged with base's (the
    stricter applies, worker/evals/rules.py), without base's other suites."""
    at_base = {s.name: s for s in base.suites} if base is not None else {}
    return replace(own, suites=tuple(merge_suite(at_base[s.name], s) if s.name in at_base
                                     else s for s in own.suites))


def combine(report: GateReport, own: GateReport,
            changes: Mapping[str, tuple[str, ...]]) -> GateReport:
    """Put head's verdict under its own contract beside the gate's (see the module docstring).

    Args:
        report: the verdict of head's target on base's contract (finished:
            worker/evals/health.py).
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


def describe(parts: tuple[str, ...]) -> str:
    """The contract components in words, e.g. ``expected values or the set of examples``."""
    return ", ".join(DESCRIPTIONS.get(p, p) for p in parts)


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
    lines = {s.name: (s.dataset, _lines(head_root, s.dataset)) for s in head.suites
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


def _lines(root: Path, dataset: str) -> dict[str, int]:
    try:
        return {e.id: e.line for e in load_dataset(root, dataset)}
    except ConfigError:
        return {}
