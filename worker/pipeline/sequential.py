"""``settings.sequential`` in a gate: answer head in looks and stop once the gate is settled.

Read from base only (worker/evals/verdict/rules.py). Head's examples are answered in
``looks`` batches (worker/evals/run/runner.py `Looks`, `look_order`); after each batch
`SequentialGate.decide` pairs them with base's same examples and asks
worker/evals/verdict/sequential.py about the gate's ``regression`` family:

- **fail**: the family's smallest adjusted p-value crossed this look's alpha-spending boundary
  and the gate's own report on the examples seen (its regression alphas scaled to that
  boundary) fails too; or a rule that more examples cannot undo failed (``critical``,
  ``max_new_failures``). The false-alarm rate stays at most alpha: the boundaries spend alpha
  over the looks (Lan & DeMets 1983), see worker/evals/verdict/sequential.py.
- **pass**: the predictive probability that the full run fails is under the futility bound and
  the report on the examples seen passes; only when every rule is a ``regression`` rule (a
  threshold, margin, count or critical rule is settled by the full run alone). Passing early
  adds no false alarm.

A run that goes the whole way is decided by the report at the last look's boundary c_K (at most
alpha: what the earlier looks spent is not spent twice). The looks rank the same sign-flip
p-values as the report's family, over the same subgroup of sign patterns (same seed and size),
so when the look order equals the report's example order (one suite) the last look's G is the
report's first step-down p-value and the level is exact; with several suites the look order
interleaves them and the two statistics are equal in distribution, not row by row. The report
says where and why the run stopped.
"""

from __future__ import annotations

import zlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from worker.evals.run import look_key
from worker.evals.score import suite_metrics
from worker.evals.types import Config, GateReport, GateRule, RunResult
from worker.evals.verdict import (
    DRAWS,
    SEED,
    FamilySuite,
    History,
    Look,
    family_arrays,
    has_example_values,
    pair_suite,
    sequential_look,
)

#: The report of the examples seen at a look, with regression alphas scaled by a factor.
Verdict = Callable[[RunResult, float], Awaitable[GateReport]]
#: Rules that more examples cannot undo once they fail.
_FINAL_RULES = ("max_new_failures",)


def restrict_base(base: RunResult, head: RunResult) -> RunResult:
    """Return ``base`` with each suite cut to the examples head has answered so far.

    A suite head has not run is left whole; the metrics are recomputed over the examples kept.
    """
    suites = {}
    for name, suite in base.suites.items():
        seen = head.suites.get(name)
        if seen is None:
            suites[name] = suite
            continue
        ids = {e.id for e in seen.examples}
        examples = tuple(e for e in suite.examples if e.id in ids)
        metrics = {**suite.metrics, **suite_metrics(examples)}
        suites[name] = replace(suite, examples=examples, metrics=metrics)
    return replace(base, suites=suites)


def scale_alpha(config: Config, factor: float) -> Config:
    """Return ``config`` with every ``regression`` alpha multiplied by ``factor`` (0-1).

    Below 1 the family also draws at least `DRAWS` sign patterns: a p-value of a sign-flip
    family cannot fall below about 1 / patterns, and an early look's boundary can be smaller
    than 1 / 2000.
    """
    if factor == 1.0:
        return config
    suites = tuple(replace(s, gate={m: _scaled(r, factor) for m, r in s.gate.items()})
                   for s in config.suites)
    options = config.settings.statistics
    settings = replace(config.settings,
                       statistics=replace(options, draws=max(options.draws, DRAWS)))
    return replace(config, suites=suites, settings=settings)


def _scaled(rule: GateRule, factor: float) -> GateRule:
    if rule.regression_alpha is None:
        return rule
    return replace(rule, regression_alpha=rule.regression_alpha * factor)


def only_regression(config: Config) -> bool:
    """Return whether every rule of ``config`` is a ``regression`` rule (early passes allowed)."""
    empty = GateRule("")
    for suite in config.suites:
        if suite.gate_options.critical_tags:
            return False
        for rule in suite.gate.values():
            plain = replace(rule, metric="", line=None, regression_alpha=None, primary=False)
            if plain != empty:
                return False
    return True


@dataclass
class SequentialGate:
    """The looks of one sequential head run (module docstring).

    Attributes:
        rules: the config gated with (rules of base, or the stricter of both).
        base: base's full run.
        looks: planned looks (``settings.sequential.looks``).
        history: earlier values of each suite's examples, which weigh them (as in `compare`).
        decided: every look decided so far; stopped: why the run stopped early ("" if not);
        passed: it stopped to pass.
    """

    rules: Config
    base: RunResult
    looks: int
    history: Mapping[str, History] = field(default_factory=dict)
    decided: list[Look] = field(default_factory=list)
    stopped: str = ""
    passed: bool = False

    @property
    def alpha(self) -> float:
        """The gate's level: the smallest ``regression`` alpha (0.05 without one)."""
        alphas = [r.regression_alpha for s in self.rules.suites for r in s.gate.values()
                  if r.regression_alpha is not None]
        return min(alphas, default=0.05)

    @property
    def scale(self) -> float:
        """Factor (0-1] on the regression alphas of the report: 1 after an early pass, else the
        last look's level / alpha (`level`)."""
        if self.passed or not self.decided:
            return 1.0
        return self.level / self.alpha

    @property
    def level(self) -> float:
        """The last look's level on the report's regression tests (0-1].

        Its boundary c_k; when c_k is 0 (no sign pattern of the examples seen reaches the
        look's spend, e.g. 3 discordant pairs give p >= 0.125), the look's own spend instead.
        Both decide alike: with c_k = 0 every pattern still in play has G_k above the spend
        (G counts the patterns at or below it), so the report's first step-down p-value cannot
        reach it either, and the report shows the alpha the look planned, not a vanishing one.
        """
        last = self.decided[-1]
        return last.level if last.level > 0 else max(last.spend, 1e-9)

    def look(self, head: RunResult, look: int) -> Look:
        """Decide look ``look`` (1-based) on head's examples so far (worker/evals/verdict/
        sequential.py); recorded in ``decided``."""
        part = restrict_base(self.base, head)
        members, positions, counts = self._members(head, part)
        options = self.rules.settings.statistics
        sizes = tuple(sum(round(n * k / self.looks) for n in counts)
                      for k in range(1, self.looks + 1))
        if len(set(sizes)) < len(sizes):  # fewer examples than looks: decide at the end
            found = Look(look, self.looks, sizes[look - 1], sizes[-1], 0.0, self.alpha, 1.0,
                         1.0, "continue")
            self.decided.append(found)
            return found
        x, scopes, shares = family_arrays(members, options)
        seen = sizes[look - 1]
        rows = np.concatenate(positions) if positions else np.zeros(0, dtype=np.intp)
        big_x, big_scopes = np.zeros((seen, x.shape[1])), np.zeros((scopes.shape[0], seen), bool)
        keep = rows < seen
        big_x[rows[keep]] = x[keep]
        big_scopes[:, rows[keep]] = scopes[:, keep]
        seed = SEED ^ zlib.crc32("\0".join(m.name for m in members).encode("utf-8"))
        found = sequential_look(big_x, big_scopes, shares, sizes, alpha=self.alpha,
                                spending=options.spending, draws=max(options.draws, DRAWS),
                                seed=seed)
        self.decided.append(found)
        return found

    def _members(self, head: RunResult, part: RunResult
                 ) -> tuple[list[FamilySuite], list[np.ndarray], list[int]]:
        """The family's suites, each paired row's place in the planned look order, and each
        suite's planned examples."""
        members, positions, counts = [], [], []
        for suite in self.rules.suites:
            base_suite = part.suites.get(suite.name)
            head_suite = head.suites.get(suite.name)
            full = self.base.suites.get(suite.name)
            if base_suite is None or head_suite is None or full is None:
                continue
            metrics = [m for m in suite.gate if has_example_values(m)]
            paired = pair_suite(base_suite, head_suite, metrics, suite.gate_options.group_by,
                                suite.gate_options.critical_tags)
            ids = sorted({e.id for e in full.examples}, key=look_key)
            order = {example_id: i for i, example_id in enumerate(ids)}
            members.append(FamilySuite(suite.name, paired, suite.gate,
                                       suite.gate_options.group_min_items,
                                       self.history.get(suite.name)))
            positions.append(np.array([order[i] for i in paired.ids], dtype=np.intp))
            counts.append(len(order))
        return members, _interleave(positions, counts, self.looks), counts

    async def decide(self, head: RunResult, look: int, verdict: Verdict) -> bool:
        """Return whether the run stops after look ``look`` (module docstring)."""
        found = self.look(head, look)
        if found.verdict == "pass" and only_regression(self.rules):
            if (await verdict(head, 1.0)).conclusion == "success":
                self.passed = True
                self.stopped = (f"the gate passes: no regression at alpha {self.alpha:g} on "
                                f"the examples seen, and the full run would fail with "
                                f"predictive probability {found.predictive:.3f}")
            return self.passed
        report = await verdict(head, self.scale)
        if report.conclusion != "failure":
            return False
        if _final_failure(report):
            self.stopped = "the gate fails: a rule that more examples cannot undo failed"
        elif found.verdict == "fail":
            self.stopped = (f"the gate fails: the family's smallest adjusted p-value "
                            f"{found.family_p:.4g} is at most this look's boundary "
                            f"{found.level:.4g}")
        return bool(self.stopped)

    def note(self) -> str:
        """One line for the report: where the run stopped and why, or that it ran whole."""
        last = self.decided[-1]
        options = self.rules.settings.statistics
        head = (f"sequential ({options.looks} looks, {options.spending} spending, alpha "
                f"{self.alpha:g})")
        if self.stopped:
            return (f"{head}: stopped early after {last.seen} of {last.total} examples "
                    f"(look {last.look} of {last.looks}): {self.stopped}"
                    + ("" if self.passed else "; regression alphas scaled to that boundary"))
        if last.level > 0 or last.spend <= 0:
            return (f"{head}: ran all {last.total} examples; the last look decides at "
                    f"{last.level:.4g} (alpha {self.alpha:g} less what earlier looks spent)")
        return (f"{head}: ran all {last.total} examples; no test can reject at the last look: "
                f"with {last.differing} of them differing between base and head, the smallest "
                f"p-value any sign pattern gives is {last.smallest:.4g}, above the look's "
                f"alpha {last.spend:.4g} (alpha {self.alpha:g} less what earlier looks spent), "
                f"so the regression tests are shown at that alpha and cannot fail")


def _interleave(positions: Sequence[np.ndarray], sizes: Sequence[int],
                looks: int) -> list[np.ndarray]:
    """Map each suite's look-order positions to one order: look by look, suite by suite."""
    start = [[round(n * k / looks) for k in range(looks + 1)] for n in sizes]
    found = []
    for s, rows in enumerate(positions):
        placed = np.empty(rows.size, dtype=np.intp)
        for i, position in enumerate(rows):
            k = next(k for k in range(looks) if position < start[s][k + 1])
            before = sum(start[t][k] for t in range(len(sizes)))  # earlier looks, all suites
            within = sum(start[t][k + 1] - start[t][k] for t in range(s))  # earlier suites
            placed[i] = before + within + position - start[s][k]
        found.append(placed)
    return found


def _final_failure(report: GateReport) -> bool:
    return any(o.status in ("fail", "regression") and
               (o.metric == "critical examples" or o.rule.startswith(_FINAL_RULES))
               for o in report.outcomes)
