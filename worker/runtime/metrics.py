"""Worker metrics: counted in memory, published to Redis, exposed by the web process.

Design: workers are separate processes (often on separate machines) that share nothing but
Redis, and Prometheus scrapes one address. So each worker counts in memory (no I/O where it
counts: a GitHub call, a job's end) and `WorkerMetrics.flush` publishes the increments to Redis
in one pipelined round trip: when a job starts and ends, every ``FLUSH_INTERVAL_S`` seconds, and
at shutdown. The web process's ``/metrics`` (``app/metrics.py``) reads the three hashes below
and renders them; counters from every worker add up in Redis, so a worker that exits loses no
count. Every web replica shows the same worker series: aggregate them with ``max``, not ``sum``.

Wire format (version 1; the key names are `worker.contract`'s, which the web process imports):

- ``llmgate:metrics:samples`` (hash): field = JSON ``[sample_name, {label: value}]`` with sorted
  labels, value = a float. Counter and histogram samples are added with ``HINCRBYFLOAT``;
  gauges are set with ``HSET`` (the last write wins). Histogram buckets are stored cumulative
  (``le`` label), as Prometheus exposes them.
- ``llmgate:metrics:meta`` (hash): family name -> JSON ``{"type": ..., "help": ...}``.
- ``llmgate:metrics:workers`` (hash): worker id -> JSON ``{"running": jobs, "seen": unix_s}``;
  the web counts a worker as alive while its entry is younger than ``WORKER_STALE_S``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from redis.asyncio import Redis

from worker.contract import META_KEY, SAMPLES_KEY, WORKERS_KEY
from worker.evals.context import CallEvent
from worker.evals.types import GateReport

log = logging.getLogger(__name__)

#: Seconds between two background flushes of a worker (also its heartbeat period).
FLUSH_INTERVAL_S = 10.0
#: Bound on one flush, seconds: Redis being slow must never hold a job up for long.
FLUSH_TIMEOUT_S = 2.0
#: Job duration histogram buckets, seconds: jobs take from seconds (a config error) to the
#: hour of ``worker.main.JOB_TIMEOUT_S``.
JOB_DURATION_BUCKETS_S: tuple[float, ...] = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600)

MetricType = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True)
class Family:
    """A metric family: ``name`` (counters without ``_total``), type, help and label names."""

    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()


JOBS = Family("llmgate_jobs", "counter",
              "Jobs run by workers, by function and outcome "
              "(completed, failed, retried, requeued by a stopping worker).",
              ("function", "outcome"))
JOB_DURATION = Family("llmgate_job_duration_seconds", "histogram",
                      "Wall-clock duration of a job in a worker, seconds.", ("function",),
                      JOB_DURATION_BUCKETS_S)
PROVIDER_CALLS = Family("llmgate_provider_calls", "counter",
                        "Requests sent to model providers (each retry counts) and command-target "
                        "runs, by kind and provider.", ("kind", "provider"))
PROVIDER_CACHE_HITS = Family("llmgate_provider_cache_hits", "counter",
                             "Model calls answered from the response cache (nothing sent), by "
                             "kind and provider.", ("kind", "provider"))
COST_USD = Family("llmgate_cost_usd", "counter",
                  "Money spent, USD: priced model answers, and what command targets report.",
                  ("kind", "provider"))
#: ``provider`` label values: litellm model prefixes kept as they are (docs.litellm.ai,
#: "Providers"); any other prefix is ``other``, so a pull request's config cannot make series
#: without bound. A model without a prefix is ``default`` (litellm infers its provider);
#: command targets are ``none``.
KNOWN_PROVIDERS = frozenset({
    "openai", "azure", "azure_ai", "anthropic", "bedrock", "vertex_ai", "gemini", "mistral",
    "cohere", "groq", "ollama", "ollama_chat", "together_ai", "openrouter", "deepseek",
    "fireworks_ai", "huggingface", "xai", "perplexity", "databricks", "watsonx", "sagemaker",
    "text-completion-openai", "hosted_vllm", "vllm", "lm_studio", "cerebras", "nvidia_nim",
    "local"})  # local: in-process embedding models (worker/evals/llm/local_embed.py)
GATE_CONCLUSIONS = Family("llmgate_gate_conclusions", "counter",
                          "Check-run conclusions of finished gate runs.", ("conclusion",))
GITHUB_CALLS = Family("llmgate_github_api_calls", "counter",
                      "GitHub REST API requests (each retry counts), by method and status "
                      "(\"error\" when no answer came).", ("method", "status"))
GITHUB_RATE_REMAINING = Family("llmgate_github_rate_limit_remaining", "gauge",
                               "Last x-ratelimit-remaining GitHub sent, by installation and "
                               "resource (docs.github.com: Rate limits for the REST API).",
                               ("installation", "resource"))


def _field(name: str, labels: Mapping[str, str]) -> str:
    """Return the hash field of one sample: JSON ``[name, {sorted labels}]``."""
    return json.dumps([name, dict(sorted(labels.items()))], separators=(",", ":"))


def _labels(family: Family, values: Sequence[str]) -> dict[str, str]:
    if len(values) != len(family.labels):
        raise ValueError(f"{family.name} takes labels {family.labels}, got {len(values)} values")
    return dict(zip(family.labels, (str(v) for v in values), strict=True))


def worker_id() -> str:
    """Return a worker process id that is unique across machines: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class WorkerMetrics:
    """One worker process's metrics, counted in memory until `flush` publishes them.

    Attributes:
        worker_id: this process's entry in ``llmgate:metrics:workers``.
        running: jobs running in this process now.
    """

    def __init__(self, worker: str | None = None) -> None:
        """Start with nothing counted; ``worker`` defaults to `worker_id()`."""
        self.worker_id = worker or worker_id()
        self.running = 0
        self._increments: defaultdict[str, float] = defaultdict(float)
        self._gauges: dict[str, float] = {}
        self._families: dict[str, Family] = {}

    def inc(self, family: Family, *labels: str, amount: float = 1.0) -> None:
        """Add ``amount`` (>= 0) to a counter sample.

        Raises:
            ValueError: a negative amount, or the wrong number of label values.
        """
        if amount < 0:
            raise ValueError(f"{family.name}: a counter only goes up (got {amount})")
        self._families[family.name] = family
        self._increments[_field(family.name + "_total", _labels(family, labels))] += amount

    def set(self, family: Family, *labels: str, value: float) -> None:
        """Set a gauge sample to ``value`` (the last write of any worker wins).

        Raises:
            ValueError: the wrong number of label values.
        """
        self._families[family.name] = family
        self._gauges[_field(family.name, _labels(family, labels))] = value

    def observe(self, family: Family, *labels: str, value: float) -> None:
        """Count ``value`` in a histogram: every bucket with ``le >= value``, ``_sum``, ``_count``.

        Raises:
            ValueError: the wrong number of label values.
        """
        self._families[family.name] = family
        base = _labels(family, labels)
        for bound in (*family.buckets, float("inf")):  # every bucket, so each one exists
            le = "+Inf" if bound == float("inf") else repr(float(bound))
            self._increments[_field(family.name + "_bucket", {**base, "le": le})] += (
                1 if value <= bound else 0)
        self._increments[_field(family.name + "_sum", base)] += value
        self._increments[_field(family.name + "_count", base)] += 1

    async def flush(self, redis: Redis, now_s: float | None = None) -> None:
        """Publish what was counted since the last flush, and this worker's heartbeat.

        Increments taken for a flush that fails are put back, so they go with the next one.

        Raises:
            redis.exceptions.RedisError, OSError: Redis failed (nothing is lost, see above).
        """
        increments, self._increments = self._increments, defaultdict(float)
        gauges, self._gauges = self._gauges, {}
        try:
            async with redis.pipeline(transaction=False) as pipe:
                for field, amount in increments.items():
                    pipe.hincrbyfloat(SAMPLES_KEY, field, amount)
                if gauges:
                    pipe.hset(SAMPLES_KEY, mapping=gauges)
                if self._families:
                    pipe.hset(META_KEY, mapping={
                        f.name: json.dumps({"type": f.type, "help": f.help})
                        for f in self._families.values()})
                beat = {"running": self.running, "seen": time.time() if now_s is None else now_s}
                pipe.hset(WORKERS_KEY, self.worker_id, json.dumps(beat))
                await pipe.execute()
        except BaseException:
            for field, amount in increments.items():
                self._increments[field] += amount
            self._gauges = {**gauges, **self._gauges}
            raise

    async def forget(self, redis: Redis) -> None:
        """Remove this worker's heartbeat (at shutdown: it runs no job any more)."""
        await redis.hdel(WORKERS_KEY, self.worker_id)  # type: ignore[misc]


#: The metrics of this process.
METRICS = WorkerMetrics()


def record_job(function: str, outcome: str, duration_s: float) -> None:
    """Count one finished job invocation and its wall-clock duration in seconds."""
    METRICS.inc(JOBS, function, outcome)
    METRICS.observe(JOB_DURATION, function, value=duration_s)


def provider_label(model: str) -> str:
    """Return the bounded ``provider`` label of a model name (see `KNOWN_PROVIDERS`).

    ``"openai/gpt-4o-mini"`` -> ``openai``; ``"gpt-4o-mini"`` -> ``default``; ``""`` (a command
    target) -> ``none``; ``"evil-123/x"`` -> ``other``.
    """
    if not model:
        return "none"
    if "/" not in model:
        return "default"
    prefix = model.split("/", 1)[0].strip().lower()
    return prefix if prefix in KNOWN_PROVIDERS else "other"


def record_call(event: CallEvent) -> None:
    """Count one call of an eval run (`worker.evals.context.Observers.on_call` of jobs).

    Adds ``event.sent`` provider calls, ``event.cache_hits`` cache hits and ``event.cost_usd``
    USD (negative values count as 0) under ``(kind, provider_label(model))``. Every sample is
    touched, even by 0, so each series exists once its kind has been seen.
    """
    labels = (event.kind, provider_label(event.model))
    METRICS.inc(PROVIDER_CALLS, *labels, amount=float(max(event.sent, 0)))
    METRICS.inc(PROVIDER_CACHE_HITS, *labels, amount=float(max(event.cache_hits, 0)))
    METRICS.inc(COST_USD, *labels, amount=max(event.cost_usd, 0.0))


def record_github_response(method: str, status: int | None, headers: Mapping[str, str],
                           installation: str) -> None:
    """Count one GitHub API answer (``status`` None: no answer) and keep its rate-limit headroom.

    ``x-ratelimit-remaining`` / ``x-ratelimit-resource`` are GitHub's headers (docs.github.com,
    "Rate limits for the REST API"); an answer without them changes no gauge.
    """
    METRICS.inc(GITHUB_CALLS, method.upper(), "error" if status is None else str(status))
    remaining = headers.get("x-ratelimit-remaining")
    if remaining is not None and remaining.isascii() and remaining.isdigit():
        resource = headers.get("x-ratelimit-resource") or "core"
        METRICS.set(GITHUB_RATE_REMAINING, installation, resource, value=float(remaining))


def record_gate_report(report: GateReport) -> None:
    """Count a finished gate's conclusion.

    Its calls were counted as they happened, by `record_call` (the run context's ``on_call``).
    """
    METRICS.inc(GATE_CONCLUSIONS, str(report.conclusion))
