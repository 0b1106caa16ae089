"""What the dashboard's pages show, computed from the history's records. Pure (no I/O).

Records are worker/history_contract.py's (`RunRecord`, `ExampleRows`, `ExamplePoint`); the
readers return runs newest first, the charts want them oldest first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

from app.dashboard.charts import ChartPoint
from worker.history_contract import (
    ERRORED,
    FAILED,
    PASSED,
    UNSCORED,
    ExampleRows,
    MetricRecord,
    RunRecord,
)

#: Example status codes as words.
STATUS_WORDS = {PASSED: "pass", FAILED: "fail", ERRORED: "error", UNSCORED: "unscored"}
#: Columns of the history CSV (one row per branch run x suite x metric).
CSV_COLUMNS = ("run_id", "sha", "pushed_at", "suite", "metric", "value", "ci_low", "ci_high",
               "examples", "passed", "cost_usd", "provider_calls", "duration_s")


def short(sha: str) -> str:
    """Return a commit id as shown: its first 7 characters."""
    return sha[:7]


def when(unix_s: float) -> str:
    """Return Unix seconds as ``YYYY-MM-DD HH:MM`` UTC ("" for 0)."""
    if not unix_s:
        return ""
    return datetime.fromtimestamp(unix_s, UTC).strftime("%Y-%m-%d %H:%M")


def segment(text: str) -> str:
    """Return ``text`` as one URL path segment (every reserved character, ``/`` included,
    percent-encoded; ``.`` and ``..`` too, which clients would resolve)."""
    quoted = quote(text, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def suite_metrics(runs: Sequence[RunRecord], side: str = "base") -> dict[str, list[str]]:
    """Return each suite's metric names at ``side`` over ``runs``: suites sorted, metrics in
    first-seen order (newest run first)."""
    found: dict[str, dict[str, None]] = {}
    for run in runs:
        for suite in run["suites"]:
            if suite["side"] == side:
                found.setdefault(suite["suite"], {}).update(dict.fromkeys(suite["metrics"]))
    return {name: list(found[name]) for name in sorted(found)}


def gated_metrics(gates: Sequence[RunRecord]) -> dict[str, list[str]]:
    """Return per suite the metrics named by the rule verdicts of ``gates`` (pull request
    gates), in first-seen order."""
    found: dict[str, dict[str, None]] = {}
    for gate in gates:
        for suite in gate["suites"]:
            for verdict in suite["verdicts"]:
                found.setdefault(suite["suite"], {})[verdict["metric"]] = None
    return {name: list(metrics) for name, metrics in found.items()}


def headline_metrics(suites: Mapping[str, Sequence[str]],
                     gated: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Return per suite the metrics shown first: the gated ones it has, else ``pass_rate``,
    else its first metric."""
    chosen = {}
    for suite, metrics in suites.items():
        picked = [m for m in gated.get(suite, ()) if m in metrics]
        chosen[suite] = picked or (["pass_rate"] if "pass_rate" in metrics else list(metrics[:1]))
    return chosen


def trends(runs: Sequence[RunRecord], href: Callable[[str], str],
           side: str = "base") -> dict[tuple[str, str], list[ChartPoint]]:
    """Return the chart points of every (suite, metric) at ``side`` over ``runs`` (given
    newest first; each list oldest first, one point per run): the short commit, value and
    interval, the push time (and "full report" when the run stored one: its page links it),
    a link to ``href(run_id)``; a run without the metric is a gap.
    Keys come suites sorted, metrics in first-seen order (`suite_metrics`)."""
    ordered = list(reversed(runs))
    found: dict[tuple[str, str], list[MetricRecord | None]] = {}
    for i, run in enumerate(ordered):
        for suite in run["suites"]:
            if suite["side"] != side:
                continue
            for metric, record in suite["metrics"].items():
                found.setdefault((suite["suite"], metric), [None] * len(ordered))[i] = record
    stamps = [(short(run["sha"]), href(run["run_id"]), _point_note(run)) for run in ordered]
    out = {}
    for suite, metrics in suite_metrics(runs, side).items():
        for metric in metrics:
            out[suite, metric] = [
                ChartPoint(label, r.get("value"), r.get("ci_low"), r.get("ci_high"), link, note)
                if r is not None else ChartPoint(label, None, href=link, note=note)
                for r, (label, link, note) in zip(found[suite, metric], stamps, strict=True)]
    return out


def _point_note(run: RunRecord) -> str:
    """Return a chart point's tooltip note: the run's push time, and "full report" when it
    stored one (its run page links it)."""
    stored = run.get("report_url") or run.get("report_id") or run.get("reports")
    return when(run["order_s"]) + (" · full report" if stored else "")


@dataclass(frozen=True)
class Totals:
    """What a run cost: USD and provider calls over its suites, and its duration in seconds."""

    cost_usd: float
    provider_calls: int
    duration_s: float


def totals(run: RunRecord) -> Totals:
    """Return a run's cost, provider calls (summed over its suites) and duration."""
    return Totals(round(sum(s["cost_usd"] for s in run["suites"]), 6),
                  sum(s["provider_calls"] for s in run["suites"]), run["duration_s"])


@dataclass(frozen=True)
class Flap:
    """An example whose status changed between consecutive runs ``changes`` times over the
    ``runs`` runs that had it; ``last`` its newest status word."""

    suite: str
    example_id: str
    changes: int
    runs: int
    last: str


def flaps(examples: Sequence[Mapping[str, ExampleRows]], side: str = "base",
          limit: int = 20) -> list[Flap]:
    """Return the examples that flap most over ``examples`` (each run's ``<side>|<suite>`` ->
    rows, oldest run first): most status changes first, then suite and id; never one with no
    change."""
    seen: dict[tuple[str, str], list[int]] = {}
    for run in examples:
        for field, rows in run.items():
            kept_side, _, suite = field.partition("|")
            if kept_side != side:
                continue
            for row in rows["rows"]:
                seen.setdefault((suite, str(row[0])), []).append(int(row[2]))
    found = [Flap(suite, example_id, changes, len(statuses), STATUS_WORDS.get(statuses[-1], "?"))
             for (suite, example_id), statuses in seen.items()
             if (changes := sum(a != b for a, b in zip(statuses, statuses[1:], strict=False)))]
    found.sort(key=lambda f: (-f.changes, f.suite, f.example_id))
    return found[:limit]


@dataclass(frozen=True)
class JudgePoint:
    """A judge's agreement with people measured by one pull request gate: the gate (run id,
    pull request, head commit, when, Unix s) and `JudgeRecord`'s figures (agreement and
    reference 0-1, Cohen's kappa -1 to 1, n labelled answers; None where unknown)."""

    run_id: str
    pr_number: int
    sha: str
    created_at: float
    agreement: float | None
    reference: float | None
    kappa: float | None
    n: int | None
    status: str


@dataclass(frozen=True)
class JudgeSeries:
    """One judge (a suite's criterion) over the gates that measured it, oldest first."""

    suite: str
    criterion: str
    points: list[JudgePoint]


def judge_series(gates: Sequence[RunRecord]) -> list[JudgeSeries]:
    """Return each judge's agreement over ``gates`` (pull request gates, newest first; those
    without ``judges`` add nothing), sorted by suite and criterion, points oldest first."""
    found: dict[tuple[str, str], list[JudgePoint]] = {}
    for gate in reversed(gates):
        for record in gate.get("judges", ()):
            found.setdefault((str(record.get("suite", "")), str(record.get("criterion", ""))),
                             []).append(JudgePoint(
                gate["run_id"], gate["pr_number"], gate["sha"], gate["created_at"],
                record.get("agreement"), record.get("reference"), record.get("kappa"),
                record.get("n"), str(record.get("status", ""))))
    return [JudgeSeries(suite, criterion, points)
            for (suite, criterion), points in sorted(found.items())]


def judge_note(point: JudgePoint) -> str:
    """Return a judge point's tooltip text: when, kappa, n, the reference and the verdict."""
    parts = [when(point.created_at)]
    if point.kappa is not None:
        parts.append(f"kappa {point.kappa:.2f}")
    if point.n is not None:
        parts.append(f"n {point.n}")
    if point.reference is not None:
        parts.append(f"reference {point.reference:.0%}")
    return " · ".join(p for p in [*parts, point.status] if p)


def csv_rows(runs: Sequence[RunRecord]) -> Iterator[list[str]]:
    """Yield the history CSV's rows (`CSV_COLUMNS`) of branch ``runs`` (given newest first,
    yielded oldest first): one per run x suite (base side) x metric. A suite or metric name a
    spreadsheet would read as a formula (``=``, ``+``, ``-``, ``@``) gets a leading ``'``."""
    for run in reversed(runs):
        for suite in run["suites"]:
            if suite["side"] != "base":
                continue
            for metric, record in suite["metrics"].items():
                yield [run["run_id"], run["sha"], when(run["order_s"]), _cell(suite["suite"]),
                       _cell(metric), _num(record.get("value")), _num(record.get("ci_low")),
                       _num(record.get("ci_high")), str(suite["examples"]), str(suite["passed"]),
                       _num(suite["cost_usd"]), str(suite["provider_calls"]),
                       _num(run["duration_s"])]


def _cell(text: str) -> str:
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _num(value: float | None) -> str:
    return "" if value is None else repr(float(value))
