"""One line per gated metric with its trend on the default branch (pure; issue 35).

The sticky comment and the ``llmgate`` check run's summary show, under the metric table, one
line per gated metric of a suite: a sparkline of the metric over the default branch's last
pushes (oldest to newest), this pull request's base and head value marked after it, the range
of the pushes and whether head lies inside it, so a reviewer sees whether a drop is news or
noise (one line each in the report; wrapped here)::

    **Trend on `main`** (the last pushes, oldest → newest; then this pull request's base
    and head):
    - tickets pass_rate: ▅▆▆▇█▇▆▇▇▇ │ base ▇ · head ▁ · head 0.700 is below every one of
      the last 10 pushes (0.780–0.840)

The values are read by the gate (worker/gate/trend_read.py: one bounded read of the history,
worker/history_contract.py) and passed in as `TrendData`; this module does no I/O. Suite and
metric names are escaped with `worker.report.markdown.inline`, the branch name made fit for a
code span (`worker.report.markdown.safe`). Without data (no history, a failed read) there are no
lines and every report renders byte for byte as before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from worker.evals.types import GateReport
from worker.pipeline import MultiReport
from worker.report.markdown import inline, safe

#: The eight heights of a sparkline, lowest first (U+2581..U+2588).
BLOCKS = "▁▂▃▄▅▆▇█"
#: Fewest pushes holding a metric for its line to be shown (one point is no trend).
MIN_POINTS = 2
#: Most pushes drawn in one sparkline (the newest; bounds a line's bytes).
MAX_POINTS = 50
#: Most metric lines per report (a config's section); the rest are counted in one line.
MAX_LINES = 20
#: Two values closer than this are equal (range checks of rounded fractions).
_EPSILON = 1e-9


@dataclass(frozen=True)
class TrendData:
    """The default branch's history of the gated metrics, as the gate read it.

    Attributes:
        branch: the branch the runs were pushed to ("" unknown).
        series: (suite as the history names it: ``<folder>: <suite>`` for a config in a
            folder, metric) -> the metric's values at the base side of each push, oldest
            first (fractions 0-1 for rates).
    """

    branch: str
    series: Mapping[tuple[str, str], tuple[float, ...]] = field(default_factory=dict)


def scoped(folder: str, suite: str) -> str:
    """Return a suite's name as the history and the merged report name it: ``<folder>:
    <suite>``, or ``suite`` for the root config."""
    return f"{folder}: {suite}" if folder else suite


def gated(report: GateReport) -> list[tuple[str, str, float | None, float | None]]:
    """Return (suite, metric, base value, head value) of each metric a rule of ``report``
    gated for a whole suite (group rules left out), in the report's order, once each."""
    found: dict[tuple[str, str], tuple[float | None, float | None]] = {}
    for o in report.outcomes:
        if o.group:
            continue
        base, head = found.get((o.suite, o.metric), (None, None))
        found[(o.suite, o.metric)] = (base if base is not None else o.base,
                                      head if head is not None else o.head)
    return [(suite, metric, base, head) for (suite, metric), (base, head) in found.items()]


def wanted(multi: MultiReport) -> frozenset[tuple[str, str]]:
    """Return the (history suite name, metric) of every gated metric of every config."""
    return frozenset((scoped(c.folder, suite), metric)
                     for c in multi.configs for suite, metric, _, _ in gated(c.report))


def sparkline(values: Sequence[float], low: float, high: float) -> str:
    """Return one block of `BLOCKS` per value, scaled from ``low`` (▁) to ``high`` (█);
    every value a middle block (▄) when ``high - low`` is about 0."""
    span = high - low
    if span <= _EPSILON:
        return BLOCKS[3] * len(values)
    top = len(BLOCKS) - 1
    return "".join(BLOCKS[min(max(round((v - low) / span * top), 0), top)] for v in values)


def _num(value: float) -> str:
    return f"{value:.3f}"


def _pushes(count: int) -> str:
    return "the last push" if count == 1 else f"the last {count} pushes"


def placement(head: float, values: Sequence[float]) -> str:
    """Return where ``head`` lies against ``values`` (the pushes): ``within the range of the
    last N pushes``, ``below every one of ...`` or ``above every one of ...``."""
    low, high = min(values), max(values)
    if head < low - _EPSILON:
        return f"below every one of {_pushes(len(values))}"
    if head > high + _EPSILON:
        return f"above every one of {_pushes(len(values))}"
    return f"within the range of {_pushes(len(values))}"


def trend_line(suite: str, metric: str, values: Sequence[float], base: float | None,
               head: float | None) -> str | None:
    """Return one metric's line (markdown list item, names escaped), or None when it has
    fewer than `MIN_POINTS` finite values or no finite head value.

    ``values`` are the pushes' values, oldest first (the newest `MAX_POINTS` are drawn and
    counted); the sparkline's scale spans them, ``base`` and ``head``, so the marked base and
    head blocks compare with the pushes'.
    """
    points = [v for v in values if math.isfinite(v)][-MAX_POINTS:]
    if len(points) < MIN_POINTS or head is None or not math.isfinite(head):
        return None
    ends = [head] + ([base] if base is not None and math.isfinite(base) else [])
    low, high = min(*points, *ends), max(*points, *ends)
    marks = (f"base {sparkline([base], low, high)} · " if len(ends) == 2 and base is not None
             else "")
    return (f"- {inline(suite, 100)} {inline(metric, 100)}: {sparkline(points, low, high)} │ "
            f"{marks}head {sparkline([head], low, high)} · head {_num(head)} is "
            f"{placement(head, points)} ({_num(min(points))}–{_num(max(points))})")


def trend_lines(report: GateReport, data: TrendData | None, folder: str = "") -> tuple[str, ...]:
    """Return the trend block of ``report`` (a config in ``folder``, "" the root): a heading
    and one `trend_line` per gated metric with history, at most `MAX_LINES` (then a count);
    () without data or without a line, so the report renders as before."""
    if data is None:
        return ()
    found = [line for suite, metric, base, head in gated(report)
             if (line := trend_line(suite, metric,
                                    data.series.get((scoped(folder, suite), metric), ()),
                                    base, head)) is not None]
    if not found:
        return ()
    branch = f"`{safe(data.branch, 60)}`" if safe(data.branch, 60) else "the default branch"
    more = [f"- … {len(found) - MAX_LINES} more gated metrics"] if len(found) > MAX_LINES else []
    return (f"**Trend on {branch}** (the last pushes, oldest → newest; then this pull "
            "request's base and head):", *found[:MAX_LINES], *more)
