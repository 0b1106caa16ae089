"""Read and shape a repository's page and its line on the repositories page.

`repository_page` and `summary` read the history through worker/history_contract.py (a few
pipelined round trips); `shape_page` and `shape_summary` (pure) turn the records into a frozen
value: what the template draws and ``data``, the JSON form. ``llmgate history``'s static export
(worker/cli/history_site.py) shapes a baseline store's records with the same two.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from markupsafe import Markup
from redis.asyncio import Redis

from app.dashboard import model
from app.dashboard.charts import ChartPoint, sparkline, trend_chart
from worker import history_contract as history
from worker.history_contract import ExampleRows, MetricRecord, RunRecord

#: Pull request gates listed on a repository page, and on the repositories page.
PR_GATES = 50
INDEX_GATES = 5
#: Branch runs whose examples are compared for flapping, and the sparklines' length on the
#: repositories page.
FLAP_RUNS = 30
SPARK_RUNS = 30
#: Newest pull request gates searched for a judge's agreement with people.
JUDGE_GATES = 500


@dataclass(frozen=True)
class MetricRow:
    """One metric of a suite: its newest record (None: the newest run lacks it), a sparkline
    of the runs shown and, for a charted metric, its trend chart."""

    suite: str
    metric: str
    latest: MetricRecord | None
    spark: Markup
    chart: Markup | None = None


@dataclass(frozen=True)
class RepositoryPage:
    """A repository's page: its metric rows per suite, cost charts, flapping examples, pull
    request gates and its judges' agreement with people (``judges``, charted in
    ``judge_charts``; none when no gate calibrated a judge); ``data`` is the JSON answer."""

    repo: str
    base: str
    runs_shown: int
    every: bool
    counts: tuple[int, int]
    latest: RunRecord | None
    suites: dict[str, list[MetricRow]]
    costs: list[Markup]
    flaky: list[model.Flap]
    gates: list[RunRecord]
    data: dict[str, Any] = field(repr=False)
    judges: list[model.JudgeSeries] = field(default_factory=list)
    judge_charts: list[Markup] = field(default_factory=list)


def latest_metric(run: RunRecord | None, suite: str, metric: str) -> MetricRecord | None:
    """Return ``metric`` of ``suite`` at the base side of ``run`` (a branch run's own), or
    None."""
    if run is None:
        return None
    return next((s["metrics"].get(metric) for s in run["suites"]
                 if s["suite"] == suite and s["side"] == "base"), None)


def metric_rows(runs: list[RunRecord], charted: dict[str, list[str]], every: bool,
                base: str) -> dict[str, list[MetricRow]]:
    """Return each suite's metric rows over ``runs`` (newest first): the latest value, a
    sparkline, and a trend chart for the ``charted`` metrics (every one with ``every``); each
    point links to ``<base>/runs/<run id>``."""
    def href(run_id: str) -> str:
        return f"{base}/runs/{model.segment(run_id)}"

    latest = runs[0] if runs else None
    suites: dict[str, list[MetricRow]] = {}
    for (suite, metric), points in model.trends(runs, href).items():
        title = f"{suite} · {metric}"
        chart = (trend_chart(points, title=title)
                 if every or metric in charted.get(suite, ()) else None)
        suites.setdefault(suite, []).append(MetricRow(
            suite, metric, latest_metric(latest, suite, metric),
            sparkline([p.value for p in points], title=title), chart))
    return suites


def cost_charts(runs: list[RunRecord], base: str) -> list[Markup]:
    """Return the charts of cost (USD), provider calls and duration (s) per run over ``runs``
    (newest first), each point linking to ``<base>/runs/<run id>``."""
    ordered = list(reversed(runs))
    spent = [model.totals(run) for run in ordered]
    charts = []
    for title, values in (("cost (USD) per run", [t.cost_usd for t in spent]),
                          ("provider calls per run", [float(t.provider_calls) for t in spent]),
                          ("duration (s) per run", [t.duration_s for t in spent])):
        points = [ChartPoint(model.short(run["sha"]), value,
                             href=f"{base}/runs/{model.segment(run['run_id'])}",
                             note=model.when(run["order_s"]))
                  for run, value in zip(ordered, values, strict=True)]
        charts.append(trend_chart(points, title=title, height=110))
    return charts


async def branch_examples(redis: Redis, repo: str,
                          run_ids: list[str]) -> list[dict[str, ExampleRows]]:
    """Return the examples of each run of ``run_ids`` (one round trip), in the same order.

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    async with redis.pipeline(transaction=False) as pipe:
        for run_id in run_ids:
            pipe.hgetall(history.examples_key(repo, run_id))
        found = await pipe.execute()
    return [{k.decode("utf-8", "replace") if isinstance(k, bytes) else str(k): rows
             for k, v in (blobs or {}).items()
             if (rows := history.decode_examples(v)) is not None} for blobs in found]


async def history_stamp(redis: Redis, repo: str) -> tuple[Any, ...]:
    """Return what changes whenever ``repo`` gets a new record: its newest branch run and
    newest gate (id and index score) and the indexes' sizes (one round trip).

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    async with redis.pipeline(transaction=False) as pipe:
        for key in (history.branch_key(repo), history.prs_key(repo)):
            pipe.zrevrange(key, 0, 0, withscores=True)
            pipe.zcard(key)
        found = await pipe.execute()
    return tuple((tuple(map(tuple, item)) if isinstance(item, list) else item)
                 for item in found)


def judge_charts(series: Sequence[model.JudgeSeries], base: str) -> list[Markup]:
    """Return one trend chart per judge (`model.JudgeSeries`): its agreement with people
    (0-1) at each gate that measured it, oldest first, each point linking to
    ``<base>/runs/<run id>`` with its kappa and n in the tooltip."""
    charts = []
    for judge in series:
        points = [ChartPoint(f"#{p.pr_number}", p.agreement,
                             href=f"{base}/runs/{model.segment(p.run_id)}",
                             note=model.judge_note(p))
                  for p in judge.points]
        charts.append(trend_chart(points, title=f"{judge.suite} · {judge.criterion}: "
                                                "agreement with people", height=110,
                                  span=(0.0, 1.0)))
    return charts


def shape_page(repo: str, base: str, runs: Sequence[RunRecord], gates: Sequence[RunRecord],
               counts: tuple[int, int], examples: Sequence[Mapping[str, ExampleRows]], *,
               runs_shown: int, every: bool, listed: Sequence[RunRecord] | None = None,
               judged: Sequence[RunRecord] = ()) -> RepositoryPage:
    """Shape ``repo``'s page (pure): its branch ``runs`` (newest first, without examples)
    charted (the metrics ``gates`` gate, or ``pass_rate``, or all with ``every``), ``gates``
    listed, the flapping examples of ``examples`` (each run's ``<side>|<suite>`` -> rows,
    newest first), the judges' agreement with people over ``judged`` (gates that measured
    it, newest first); ``counts`` the kept (branch runs, gates); ``listed`` the branch runs
    the JSON lists (default ``runs``). Links go under ``base``."""
    runs, gates = list(runs), list(gates)
    flaky = model.flaps(list(examples)[::-1])
    charted = model.headline_metrics(model.suite_metrics(runs), model.gated_metrics(gates))
    judges = model.judge_series(judged)
    data = {"repo": repo, "counts": {"branch_runs": counts[0], "pr_gates": counts[1]},
            "branch_runs": runs if listed is None else list(listed), "pr_gates": gates,
            "flaky": [asdict(f) for f in flaky],
            "judge_agreement": [asdict(j) for j in judges]}
    return RepositoryPage(repo, base, runs_shown, every, counts, runs[0] if runs else None,
                          metric_rows(runs, charted, every, base), cost_charts(runs, base),
                          flaky, gates, data, judges, judge_charts(judges, base))


async def repository_page(redis: Redis, repo: str, runs_shown: int, every: bool,
                          base: str) -> RepositoryPage:
    """Read and shape ``repo``'s page (`shape_page`): its newest ``runs_shown`` branch runs,
    the newest `PR_GATES` gates, the examples of the newest `FLAP_RUNS` runs and the gates
    among the newest `JUDGE_GATES` that measured a judge's agreement with people.

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    counts = await history.count_runs(redis, repo)
    runs = await history.list_branch_runs(redis, repo, limit=runs_shown)
    gates = await history.list_pr_gates(redis, repo, limit=PR_GATES)
    examples = await branch_examples(redis, repo, [r["run_id"] for r in runs[:FLAP_RUNS]])
    judged = await history.judge_history(redis, repo, limit=JUDGE_GATES)
    return shape_page(repo, base, runs, gates, counts, examples, runs_shown=runs_shown,
                      every=every, judged=judged)


@dataclass(frozen=True)
class RepoSummary:
    """A repository's line on the repositories page; ``data`` is its JSON form."""

    repo: str
    last_s: float
    latest: RunRecord | None
    rows: list[MetricRow]
    gates: list[RunRecord]
    data: dict[str, Any] = field(repr=False)


async def summary(redis: Redis, repo: str, last_s: float) -> RepoSummary:
    """Read ``repo``'s newest branch run, its headline metrics over the newest `SPARK_RUNS`
    runs and its newest `INDEX_GATES` pull request gates.

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    runs = await history.list_branch_runs(redis, repo, limit=SPARK_RUNS)
    gates = await history.list_pr_gates(redis, repo, limit=INDEX_GATES)
    return shape_summary(repo, last_s, runs, gates)


def shape_summary(repo: str, last_s: float, runs: Sequence[RunRecord],
                  gates: Sequence[RunRecord]) -> RepoSummary:
    """Shape ``repo``'s line (pure): the headline metrics' sparklines over its branch
    ``runs`` (newest first, without examples), its newest ``gates``; ``last_s`` when it last
    got a record (Unix s)."""
    runs, gates = list(runs), list(gates)
    headline = model.headline_metrics(model.suite_metrics(runs), model.gated_metrics(gates))
    latest = runs[0] if runs else None
    rows, trends = [], {}
    series = model.trends(runs, str)
    for suite, metrics in headline.items():
        for metric in metrics:
            values = [p.value for p in series[suite, metric]]
            trends[f"{suite}|{metric}"] = values
            rows.append(MetricRow(suite, metric, latest_metric(latest, suite, metric),
                                  sparkline(values, title=f"{suite} · {metric}")))
    data = {"repo": repo, "last_s": last_s, "latest": latest, "pr_gates": gates,
            "trends": trends}
    return RepoSummary(repo, last_s, latest, rows, gates, data)
