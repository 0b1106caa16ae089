"""Read and shape a repository's page and its line on the repositories page.

Each function reads the history through worker/history_contract.py (a few pipelined round
trips) and returns a frozen value: what the template draws and ``data``, the JSON form.
"""

from __future__ import annotations

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
    """A repository's page: its metric rows per suite, cost charts, flapping examples and
    pull request gates; ``data`` is the JSON answer."""

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


async def repository_page(redis: Redis, repo: str, runs_shown: int, every: bool,
                          base: str) -> RepositoryPage:
    """Read and shape ``repo``'s page: its newest ``runs_shown`` branch runs charted (the
    gated metrics, or ``pass_rate``, or all with ``every``), the newest `PR_GATES` gates and
    the examples of the newest `FLAP_RUNS` runs.

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    counts = await history.count_runs(redis, repo)
    runs = await history.list_branch_runs(redis, repo, limit=runs_shown)
    gates = await history.list_pr_gates(redis, repo, limit=PR_GATES)
    examples = await branch_examples(redis, repo, [r["run_id"] for r in runs[:FLAP_RUNS]])
    flaky = model.flaps(examples[::-1])
    charted = model.headline_metrics(model.suite_metrics(runs), model.gated_metrics(gates))
    data = {"repo": repo, "counts": {"branch_runs": counts[0], "pr_gates": counts[1]},
            "branch_runs": runs, "pr_gates": gates, "flaky": [asdict(f) for f in flaky]}
    return RepositoryPage(repo, base, runs_shown, every, counts, runs[0] if runs else None,
                          metric_rows(runs, charted, every, base), cost_charts(runs, base),
                          flaky, gates, data)


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
