"""Score head's target on base's evaluation contract: a pull request cannot change its own test.

A suite's **evaluation contract** is what decides whether an output is good enough: its
dataset (the examples' ids, inputs, vars, expected values, tags, metadata and own
assertions), its assertions and the files they read (schemas, python functions), its judges
and embedding models (``settings.judge``/``embedding`` included) with their rubrics, its
traps, and its gate rules (worker/evals/verdict/rules.py) and run settings
(worker/evals/config/base_settings.py). What the pull request puts **under test** is the target: the
command, or the model, its parameters and prompt, and the code they run.

When base has a config that ran, the gate's verdict is that of head's target on base's
contract (`gating_config`): for a suite at both sides, head's target answers base's examples,
scored by base's assertions, judges and expected values, under base's settings; base's run
used the same contract, so nothing is re-scored. So a pull request that edits ``expected``,
deletes or renames the examples it fails, loosens an assertion, lowers a judge's bar or
points ``judge`` at a lenient model changes nothing its gate sees. An example of base that
head's target cannot run (a changed input format) fails at head (worker/evals/run/runner.py),
never drops out. A suite new at head brings its own contract (nothing at base to compare).

When head changes the contract of a suite (`contract_changes`), head's target is also scored
on head's own contract (its examples, assertions and judges; base re-scored with them as
worker/evals/verdict/comparable.py does), for information, and the stricter of the two verdicts
decides (worker/evals/verdict/contract_verdict.py): head's own contract failing fails the check too
(a new example that fails, a stricter assertion head does not meet); base's failing is never made a
pass by head's passing: the check fails, the report says that it passes only under head's changed
contract, and a writer can press "Accept regression" (worker/gate/accept.py), the audited way
through. Examples added at head run only under head's contract, where every rule sees them, so they
cannot dilute base's examples in the verdict's means. Without a config at base (a repository
adopting llmgate, or a base that could not be evaluated), head's contract applies, as its rules do,
noted.

Answers are shared: an example both contracts hold (same id, input and vars) is answered once
(`worker.evals.run.runner.RunState.answers`), and head's run under both contracts has one budget.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from worker.errors import ConfigError
from worker.evals.config import load_suite_dataset
from worker.evals.run import DESCRIPTIONS as PARTS
from worker.evals.run import digest, file_digest, suite_fingerprint
from worker.evals.types import Config, Settings, SuiteConfig
from worker.evals.verdict.rules import merge_suite

#: The parts of a suite's contract compared between base and head, in report order: the
#: fingerprint's ``dataset_inputs`` and scoring components, and ``labels`` (tags, metadata).
COMPONENTS = ("dataset_inputs", "expected", "labels", "assertions", "assertion_files", "judges",
              "judge_prompts", "traps", "metrics")
#: Each component in words.
DESCRIPTIONS = {**PARTS, "labels": "example tags or metadata",
                "metrics": "custom metrics (their config or code)"}


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
        apply: worker/evals/verdict/rules.py).
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
        before = contract_components(old, base.settings, base_root)
        after = contract_components(suite, head.settings, head_root)
        parts = tuple(c for c in COMPONENTS if before[c] != after[c])
        if parts:
            found[suite.name] = parts
    return found


def contract_components(suite: SuiteConfig, settings: Settings, root: Path) -> dict[str, str]:
    """Return a digest of each of `COMPONENTS` of ``suite``'s contract at ``root`` (reads its
    files; never raises: an unreadable file gets a digest of its error)."""
    fingerprint = suite_fingerprint(suite, settings, root)
    return {"dataset_inputs": fingerprint.outputs["dataset_inputs"], **fingerprint.scoring,
            "labels": _labels(root, suite), "metrics": _metrics(root, suite)}


def _metrics(root: Path, suite: SuiteConfig) -> str:
    """Digest of the suite's custom metrics: each one's config and its function's file, so a
    head that changes (or breaks) a metric has its own contract run beside base's."""
    return digest([[m.name, m.function, m.entry_point, m.per_example,
                    file_digest(root, m.function.split(":", 1)[0]) if m.function else None]
                   for m in suite.metrics])


def _labels(root: Path, suite: SuiteConfig) -> str:
    """Digest of every example's tags and metadata, in id order."""
    dataset = suite.dataset
    try:
        examples = load_suite_dataset(root, suite)
    except ConfigError as err:
        return digest(["unreadable", dataset, err.message])
    return digest(sorted([e.id, list(e.tags), e.metadata] for e in examples))


def own_rules(base: Config | None, own: Config) -> Config:
    """Return head's own-contract config with each suite's rules merged with base's (the
    stricter applies, worker/evals/verdict/rules.py), without base's other suites."""
    at_base = {s.name: s for s in base.suites} if base is not None else {}
    return replace(own, suites=tuple(merge_suite(at_base[s.name], s) if s.name in at_base
                                     else s for s in own.suites))


def describe(parts: tuple[str, ...]) -> str:
    """The contract components in words, e.g. ``expected values or the set of examples``."""
    return ", ".join(DESCRIPTIONS.get(p, p) for p in parts)
