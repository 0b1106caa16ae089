"""Job limits and leases: a dead worker's job is taken over within ``LLMGATE_JOB_LEASE_S``.

arq marks a started job with ``arq:in-progress:<job id>`` for the longest timeout of *any*
registered function plus 10 s (arq 0.28, ``Worker.__init__`` sets ``in_progress_timeout_s`` and
``start_jobs`` PSETEXes the key with it), and no worker starts that job while the key lives. A
worker killed mid-job (SIGKILL, out of memory, a lost node) therefore holds its job that long:
hours, with the calibration cron's timeout. `job_scope` turns the key into a lease: it shortens
the key to ``lease_s`` as the job starts and renews it every ``lease_s / 3`` while the job runs,
so once a worker dies its job is started again (by another worker, or by the same one restarted)
within ``lease_s`` plus one poll, and arq counts that start as the next try. The lease is fenced
(`worker.runtime.fence`): each try keeps a token of its own in the key, and a try whose lease
lapsed and went to another try stops before its next GitHub write or provider call.

`JobLimits` holds the worker's job settings (time limit, lease, tries, sweep interval) read
from the environment once; `current_job` tells code deep inside a job which job and which try
it runs in (`worker.gate.run` uses it to reuse its check run on a retry).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from worker.runtime.fence import Lease, fenced
from worker.runtime.settings import SettingsError, whole_number

#: Defaults of the environment variables below (seconds, tries).
DEFAULT_JOB_TIMEOUT_S = 3600
DEFAULT_LEASE_S = 60
DEFAULT_MAX_TRIES = 3
DEFAULT_SWEEP_INTERVAL_S = 60
#: Bounds: a lease renewed every third of itself needs a few seconds; a job needs a minute.
MIN_LEASE_S = 3
MIN_JOB_TIMEOUT_S = 30
#: A job stops itself this many seconds before arq's time limit, so it can conclude its check
#: run ``timed_out`` itself (arq's own timeout cancels the job with no chance to say why).
TIMEOUT_MARGIN_S = 5
#: The ``ctx`` key where the worker's start-up keeps its `JobLimits`.
CTX_KEY = "job_limits"


@dataclass(frozen=True)
class JobLimits:
    """How long a job may run, how fast a dead worker's job is taken over, how often it is tried.

    Attributes:
        job_timeout_s: wall-clock limit of one try of a job, seconds (arq's ``job_timeout``).
        lease_s: seconds a killed worker's job stays claimed before another worker starts it.
        max_tries: tries of one job (arq's ``max_tries``): starts after a killed or stopped
            worker and transient-failure retries all count.
        sweep_interval_s: seconds between sweeps for abandoned check runs (`worker.gate.sweeper`);
            it divides 60, or is a whole number of minutes dividing 60.
    """

    job_timeout_s: int = DEFAULT_JOB_TIMEOUT_S
    lease_s: int = DEFAULT_LEASE_S
    max_tries: int = DEFAULT_MAX_TRIES
    sweep_interval_s: int = DEFAULT_SWEEP_INTERVAL_S

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> JobLimits:
        """Read ``LLMGATE_JOB_TIMEOUT_S``, ``LLMGATE_JOB_LEASE_S``, ``LLMGATE_JOB_MAX_TRIES``
        and ``LLMGATE_SWEEP_INTERVAL_S`` (unset or empty: the defaults 3600, 60 (at most half
        the timeout), 3, 60).

        Raises:
            SettingsError: a value is not a whole number, is below its minimum (timeout 30,
                lease 3, tries 1, sweep 1), the lease is not below the timeout, or the sweep
                interval does not fit a clock (see `worker.gate.sweeper.sweep_schedule`).
        """
        timeout_s = whole_number(environ, "LLMGATE_JOB_TIMEOUT_S", DEFAULT_JOB_TIMEOUT_S,
                             MIN_JOB_TIMEOUT_S)
        limits = cls(timeout_s,
                     whole_number(environ, "LLMGATE_JOB_LEASE_S",
                              min(DEFAULT_LEASE_S, timeout_s // 2), MIN_LEASE_S),
                     whole_number(environ, "LLMGATE_JOB_MAX_TRIES", DEFAULT_MAX_TRIES, 1),
                     whole_number(environ, "LLMGATE_SWEEP_INTERVAL_S", DEFAULT_SWEEP_INTERVAL_S, 1))
        if limits.lease_s >= limits.job_timeout_s:
            raise SettingsError(f"LLMGATE_JOB_LEASE_S ({limits.lease_s}) must be below "
                                f"LLMGATE_JOB_TIMEOUT_S ({limits.job_timeout_s})")
        interval = limits.sweep_interval_s
        if not (60 % interval == 0 if interval < 60 else interval % 60 == 0 and
                3600 % interval == 0):
            raise SettingsError("LLMGATE_SWEEP_INTERVAL_S must divide 60 (e.g. 5, 15, 30) or be "
                                f"whole minutes dividing an hour (60, 300, 600), got {interval}")
        return limits


@dataclass(frozen=True)
class JobRef:
    """The arq job the current code runs in (see `current_job`).

    Attributes:
        job_id: arq's job id.
        attempt: arq's try number, 1-based (``ctx["job_try"]``).
        installation_id: the payload's ``installation_id`` (0 when it has none).
        limits: the worker's `JobLimits`.
        started_monotonic: ``time.monotonic()`` when this try started.
    """

    job_id: str
    attempt: int
    installation_id: int
    limits: JobLimits
    started_monotonic: float

    @property
    def last_try(self) -> bool:
        """Whether arq will not start this job again after this try."""
        return self.attempt >= self.limits.max_tries

    def remaining_s(self) -> float:
        """Seconds left before the job should stop itself (arq's limit less the margin), >= 0."""
        budget = self.limits.job_timeout_s - TIMEOUT_MARGIN_S
        return max(0.0, budget - (time.monotonic() - self.started_monotonic))


_current: ContextVar[JobRef | None] = ContextVar("llmgate_current_job", default=None)


def current_job() -> JobRef | None:
    """Return the job the calling code runs in, or None outside a `job_scope`."""
    return _current.get()


async def hold_lease(redis: Redis, job_id: str, lease_s: float, attempt: int = 1) -> None:
    """Hold ``arq:in-progress:<job_id>`` for try ``attempt``, ``lease_s`` seconds at a time,
    until another try takes it (`worker.runtime.fence.Lease.hold`); cancel the task to stop.

    The key is set to the try's token at once (in place of arq's ``1``) and renewed every
    ``lease_s / 3`` seconds while it holds that token; a key that vanished is taken back unless
    another try ran meanwhile. A Redis error is logged and the next renewal tries again.
    """
    await Lease(redis, job_id, attempt, lease_s).hold()


@contextlib.asynccontextmanager
async def job_scope(ctx: Mapping[str, Any], payload: Any) -> AsyncIterator[JobRef | None]:
    """Run the body as arq job ``ctx["job_id"]``: set `current_job`, hold its lease and fence
    the body's GitHub writes and provider calls by it (`worker.runtime.fence`; the body raises
    `worker.runtime.fence.LeaseLost` once another try holds the lease).

    ``ctx`` is arq's job context; without ``job_id``, ``redis`` or the worker's `JobLimits`
    (``ctx["job_limits"]``, set at start-up) the body runs plainly and None is yielded.
    """
    limits, redis, job_id = ctx.get(CTX_KEY), ctx.get("redis"), ctx.get("job_id")
    if not isinstance(limits, JobLimits) or redis is None or not isinstance(job_id, str):
        yield None
        return
    installation = payload.get("installation_id") if isinstance(payload, Mapping) else None
    ref = JobRef(job_id, int(ctx.get("job_try") or 1),
                 installation if isinstance(installation, int) else 0, limits, time.monotonic())
    lease = Lease(redis, job_id, ref.attempt, limits.lease_s, started_s=ref.started_monotonic)
    token = _current.set(ref)
    try:
        with fenced(lease):  # GitHub writes and provider calls check the lease first
            holder = asyncio.create_task(lease.hold())
            try:
                yield ref
            finally:
                holder.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await holder
    finally:
        _current.reset(token)
