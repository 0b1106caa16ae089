"""Prometheus metrics of the web process, plus the workers' metrics it reads from Redis.

The web process counts deliveries itself (a dict update each, no I/O). Workers are
other processes that share only Redis with it: they publish their counters there (wire format in
``worker/runtime/metrics.py``; the key names are `worker.contract`'s) and ``/metrics`` reads them
with one pipelined round trip per scrape, together with the queue length. So one scrape of any web
replica shows the whole system; worker series are cluster-wide and the same on every replica.

The same round trip writes `WRITE_PROBE_KEY`: a full Redis (``OOM`` under ``noeviction``) still
answers reads, and workers cannot report it, since their heartbeats are writes; the probe's
answer is what ``/readyz`` and ``llmgate_redis_writes_refused`` say about it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from arq.connections import ArqRedis
from arq.constants import default_queue_name
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from redis.exceptions import RedisError

from worker.contract import META_KEY, SAMPLES_KEY, WORKERS_KEY, write_refusal

log = logging.getLogger(__name__)

#: A worker whose heartbeat is older than this many seconds is not counted (it flushes every
#: 10 s, so three missed beats).
WORKER_STALE_S = 30.0
#: A heartbeat older than this many seconds (a day) is deleted at the next scrape.
WORKER_FORGET_S = 86400.0
#: Bound on reading the snapshot, seconds.
SNAPSHOT_TIMEOUT_S = 2.0
#: Written (a few bytes, kept `WRITE_PROBE_TTL_MS`) by each snapshot: does Redis take writes?
WRITE_PROBE_KEY = "llmgate:write-probe"
WRITE_PROBE_TTL_MS = 60_000
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_SUFFIXES = {"counter": ("_total",), "gauge": ("",),
             "histogram": ("_bucket", "_sum", "_count")}

#: Deliveries by (event, outcome), counted by the web process itself. A plain dict: the
#: receiver is one asyncio thread, and this costs a dict update per delivery (no lock).
_deliveries: Counter[tuple[str, str]] = Counter()


def count_delivery(event: str, outcome: str) -> None:
    """Count one delivery; ``event`` must be a verified event name (or ``-``)."""
    _deliveries[(event, outcome)] += 1


def delivery_counts() -> dict[tuple[str, str], int]:
    """Return a copy of the delivery counts: (event, outcome) -> deliveries."""
    return dict(_deliveries)


@dataclass
class Snapshot:
    """What the workers published, and the queue, at one scrape.

    Attributes:
        redis_up: whether Redis answered.
        families: family name -> (type, help), from ``llmgate:metrics:meta``.
        samples: (sample name, labels, value) triples.
        running: jobs running in live workers; workers: live workers.
        queued: jobs waiting in arq's queue (its length less the running jobs, which arq keeps
            in the queue until they end).
        writes_refused: why Redis refused the probe write (`worker.contract.write_refusal`:
            ``"out of memory"``, ...), or "" while it takes writes.
    """

    redis_up: bool = False
    families: dict[str, tuple[str, str]] = field(default_factory=dict)
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)
    running: int = 0
    workers: int = 0
    queued: int = 0
    writes_refused: str = ""


async def read_snapshot(redis: ArqRedis | None, now_s: float | None = None, *,
                        samples: bool = True) -> Snapshot:
    """Read the queue length, the workers' heartbeats and (``samples``) their metrics.

    ``now_s`` (Unix seconds, default now) decides which heartbeats are stale. ``redis_up`` is
    False when Redis failed or did not answer within ``SNAPSHOT_TIMEOUT_S``; a refused probe
    write (`WRITE_PROBE_KEY`) leaves it True and sets ``writes_refused``.
    """
    if redis is None:
        return Snapshot()
    now_s = time.time() if now_s is None else now_s
    try:
        async with asyncio.timeout(SNAPSHOT_TIMEOUT_S):
            async with redis.pipeline(transaction=False) as pipe:
                pipe.set(WRITE_PROBE_KEY, str(int(now_s)), px=WRITE_PROBE_TTL_MS)
                pipe.zcard(default_queue_name)
                pipe.hgetall(WORKERS_KEY)
                if samples:
                    pipe.hgetall(META_KEY)
                    pipe.hgetall(SAMPLES_KEY)
                probe, *answers = await pipe.execute(raise_on_error=False)
        refused = write_refusal(probe) if isinstance(probe, BaseException) else None
        if isinstance(probe, BaseException) and refused is None:
            raise probe
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
    except (RedisError, OSError, TimeoutError) as exc:
        log.warning("metrics: Redis did not answer (%s)", type(exc).__name__)
        return Snapshot()
    length, workers, *published = answers
    running, live, gone = _live_workers(workers, now_s)
    if gone:  # workers killed without a shutdown never remove their own entry
        with contextlib.suppress(RedisError, OSError):
            await redis.hdel(WORKERS_KEY, *(g.decode("utf-8", "replace") for g in gone))  # type: ignore[misc]
    meta, values = published if published else ({}, {})
    return Snapshot(True, _families(meta), list(_samples(values)), running, live,
                    max(int(length) - running, 0), refused or "")


def _live_workers(workers: Mapping[bytes, bytes], now_s: float) -> tuple[int, int, list[bytes]]:
    """Return (jobs running in live workers, live workers, ids of workers gone for a day)."""
    running = live = 0
    gone = []
    for worker, raw in workers.items():
        try:
            beat = json.loads(raw)
            seen, jobs = float(beat["seen"]), int(beat["running"])
        except (ValueError, TypeError, KeyError):
            gone.append(worker)
            continue
        if now_s - seen <= WORKER_STALE_S:
            live += 1
            running += max(jobs, 0)
        elif now_s - seen > WORKER_FORGET_S:
            gone.append(worker)
    return running, live, gone


def _families(meta: Mapping[bytes, bytes]) -> dict[str, tuple[str, str]]:
    families = {}
    for name, raw in meta.items():
        try:
            spec = json.loads(raw)
            kind, text = str(spec["type"]), str(spec["help"])
        except (ValueError, TypeError, KeyError):
            continue
        if kind in _SUFFIXES and _NAME.fullmatch(name.decode()):
            families[name.decode()] = (kind, text)
    return families


def _samples(samples: Mapping[bytes, bytes]) -> Iterator[tuple[str, dict[str, str], float]]:
    for raw_field, raw_value in samples.items():
        try:
            name, labels = json.loads(raw_field)
            value = float(raw_value)
        except (ValueError, TypeError):
            continue
        if isinstance(name, str) and isinstance(labels, dict):
            yield name, {str(k): str(v) for k, v in labels.items()}, value


class SnapshotCollector:
    """A prometheus_client collector over one `Snapshot` (used for a single scrape)."""

    def __init__(self, snapshot: Snapshot) -> None:
        """Keep the snapshot to render."""
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        """Yield the web's delivery counts, the queue and worker gauges, then every family the
        workers published."""
        snap = self._snapshot
        deliveries = CounterMetricFamily(
            "llmgate_webhooks_received", "Webhook deliveries received by this web process, by "
            "event and outcome (queued, already_queued, duplicate, ignored, pong, "
            "rejected_<status>; event is '-' when the delivery was rejected).",
            labels=("event", "outcome"))
        for (event, outcome), count in sorted(delivery_counts().items()):
            deliveries.add_metric((event, outcome), count)
        yield deliveries
        yield GaugeMetricFamily("llmgate_redis_up", "Whether Redis answered this scrape (1/0).",
                                value=int(snap.redis_up))
        yield GaugeMetricFamily("llmgate_redis_writes_refused",
                                "Whether Redis refused a write this scrape (1/0): full (OOM "
                                "under noeviction), read-only or unable to persist; workers "
                                "take no job meanwhile.", value=int(bool(snap.writes_refused)))
        yield GaugeMetricFamily("llmgate_jobs_queued", "Jobs waiting in the queue.",
                                value=snap.queued)
        yield GaugeMetricFamily("llmgate_jobs_running", "Jobs running in live workers.",
                                value=snap.running)
        yield GaugeMetricFamily("llmgate_workers", "Workers that reported in the last 30 s.",
                                value=snap.workers)
        by_sample: dict[str, Metric] = {}
        for name, (kind, text) in sorted(snap.families.items()):
            metric = Metric(name, text, kind)
            for suffix in _SUFFIXES[kind]:
                by_sample[name + suffix] = metric
        for name, labels, value in sorted(snap.samples, key=_sample_order):
            target = by_sample.get(name)
            if target is not None:
                target.add_sample(name, labels, value)
        yield from {id(m): m for m in by_sample.values() if m.samples}.values()


def _sample_order(sample: tuple[str, dict[str, str], float]) -> tuple[Any, ...]:
    """Order samples by name, labels, then histogram bound ``le`` as a number."""
    name, labels, _ = sample
    le = labels.get("le")
    try:
        bound = float(le) if le is not None else 0.0
    except ValueError:
        bound = 0.0
    return name, sorted((k, v) for k, v in labels.items() if k != "le"), bound


def render(snapshot: Snapshot) -> bytes:
    """Return the Prometheus text exposition of the web metrics and ``snapshot``."""
    scrape = CollectorRegistry(auto_describe=False)
    scrape.register(SnapshotCollector(snapshot))
    return generate_latest(scrape)
