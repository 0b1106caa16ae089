"""Fence a job's try by its lease: a try that lost its lease writes nothing more to GitHub.

arq claims a job by setting ``arq:in-progress:<job id>`` to ``1``, and no worker starts the job
while that key lives; `worker.runtime.lease.job_scope` turns the key into a lease of
``LLMGATE_JOB_LEASE_S``. A lease can lapse while its try still runs (a loaded machine, a paused
process): another worker then starts the job's next try, and two tries run at once (issue 32:
the later of the two reopened a check run the other had concluded). The lease is fenced so that
only the try holding it changes what GitHub shows:

- Each try writes a token of its own into the key, ``<try>:<16 hex digits>``, in place of arq's
  ``1``, and renews it every third of the lease only while the key still holds that token
  (`RENEW_SCRIPT`: compare and extend in one Lua script; another try's token is never
  overwritten).
- A key that vanished (its try was paused beyond the lease) is taken back only when no other try
  can have run meanwhile: not when arq keeps the job's result (another try finished it), nor when
  arq counts a later try (``arq:retry:<job id>`` above this try's number). After a Redis wipe
  neither is left, and the running try takes its key back, as before the fence.
- Every GitHub write runs the same script right before it is sent (`guard_write`, called by
  `worker.github.transport` for each POST, PATCH, PUT or DELETE made with the installation's
  token, each resend included): the token is checked at the write, not only at the renewal.
  Every provider call (`worker.evals.llm.guard`) asks the renewal's last answer, and the script
  itself when that answer is older than half the lease (a process that was paused).
- A try whose key holds another token raises `LeaseLost`. It is a ``BaseException``, as
  ``asyncio.CancelledError`` is, so the ``except Exception`` handlers that conclude a check run
  ``failure`` do not take it for a failure, and a ``finally`` that still tries a write is fenced
  again. `worker.runtime.lifecycle.observed` ends the try quietly, and `fence_finished_jobs`
  makes arq leave the job's keys as they are: the lease, queue entry and try count now belong to
  the try that holds the lease.

Redis unreachable at a check: the write goes on while the lease confirmed last is in force
(``lease_s`` from when that confirmation was sent, less `MARGIN_S`): no other try can have
started meanwhile, since arq starts one only once the key has expired. Past that, the check is
asked again every `RECHECK_S` seconds for one more lease, then the try ends with `LeaseLost`
(another worker may have started the job; if none did, arq starts it again once its key expires).

What remains open: the check and the request are two steps. A try that passes the check and is
then paused, or whose request is slow to arrive, can still land that one write after its lease
lapsed. The window runs from the check's answer to GitHub performing the request: a
millisecond or so normally, as long as the pause when the process stops exactly there. GitHub
has no conditional write (no ``If-Match`` on check runs or comments) that would close it. Redis
writes of a stale try (its kept results, its registry entries) are not fenced.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import Any

from arq.constants import in_progress_key_prefix, result_key_prefix, retry_key_prefix
from arq.worker import Worker
from redis.asyncio import Redis
from redis.exceptions import RedisError

from worker.evals.llm import checking

log = logging.getLogger(__name__)

#: Seconds the lease confirmed last must still run for a write to go on while Redis is away.
MARGIN_S = 1.0
#: Longest wait for Redis's answer to one check, seconds (the worker's clients retry forever).
CHECK_TIMEOUT_S = 2.0
#: Seconds between checks while Redis does not answer and the lease confirmed last has run out.
RECHECK_S = 1.0

#: KEYS: in-progress, retry count, result. ARGV: token, lease ms, try, "1" while arq's own
#: ``1`` may be this try's claim. Returns {code, value}: 1 renewed, 2 set (claimed or taken
#: back), 0 another holds it (value: its token), 3 the job has a result, 4 a later try ran.
RENEW_SCRIPT = """
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, v}
end
if v and not (ARGV[4] == '1' and v == '1') then
  return {0, v}
end
if not v then
  if redis.call('EXISTS', KEYS[3]) == 1 then
    return {3, ''}
  end
  local tries = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
  if tries > tonumber(ARGV[3]) then
    return {4, tostring(tries)}
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {2, v or ''}
"""


class LeaseLost(BaseException):  # noqa: N818 - named for what happened, as CancelledError
    """This try's lease is another try's (or could not be confirmed): stop, write nothing more.

    A ``BaseException`` so that handlers of ``Exception`` pass it on (module docstring).

    Attributes:
        job_id: arq's job id.
        attempt: this try's number, 1-based.
        reason: why, in words (``taken by another worker (try 2 of the job holds it now)``).
    """

    def __init__(self, job_id: str, attempt: int, reason: str) -> None:
        super().__init__(f"job {job_id}: try {attempt} lost its lease: {reason}")
        self.job_id, self.attempt, self.reason = job_id, attempt, reason


def _lost_reason(code: int, value: str) -> str:
    """Say why the script refused the lease (its ``code`` and ``value``)."""
    if code == 3:
        return "another try of the job finished it meanwhile"
    if code == 4:
        return f"try {value} of the job ran meanwhile"
    holder = value.partition(":")[0]
    return "another worker is starting the job" if value == "1" else \
        f"try {holder} of the job holds it now" if holder.isdigit() else \
        f"its key holds {value[:40]!r}"


class Lease:
    """The fenced lease of one try of a job (module docstring).

    Attributes:
        job_id, attempt: the job and this try's number (arq's ``job_try``).
        lease_s: the lease, seconds (``LLMGATE_JOB_LEASE_S``).
        token: what this try writes into the key, ``<attempt>:<16 hex digits>``.
        confirmed_s: monotonic seconds when the last confirmation that held was sent (at first,
            when the try started: arq's claim holds far longer than a lease).
        lost: why the lease is lost, or None while it is held.
    """

    def __init__(self, redis: Redis, job_id: str, attempt: int, lease_s: float, *,
                 started_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """Make the lease of try ``attempt`` of ``job_id``; nothing is sent until it is used.

        Args:
            redis: the queue's Redis (arq's pool).
            started_s: monotonic seconds when the try started (default: now).
            clock: monotonic seconds (tests move it).
        """
        self.job_id, self.attempt, self.lease_s = job_id, attempt, float(lease_s)
        self.token = f"{attempt}:{secrets.token_hex(8)}"
        self._clock = clock
        self.confirmed_s = clock() if started_s is None else started_s
        self.lost: str | None = None
        self._claimed = False  # arq's "1" may be this try's own claim until Redis confirms once
        self._script = redis.register_script(RENEW_SCRIPT)
        self._keys = [in_progress_key_prefix + job_id, retry_key_prefix + job_id,
                      result_key_prefix + job_id]
        self._lock = asyncio.Lock()
        self._unconfirmed = False  # a write went on without Redis's answer (logged once)

    @property
    def held_until_s(self) -> float:
        """Monotonic seconds until which no other try can have started: the key set by the
        last confirmation lives at least ``lease_s`` from when it was sent."""
        return self.confirmed_s + self.lease_s

    def _refused(self) -> LeaseLost:
        return LeaseLost(self.job_id, self.attempt, self.lost or "")

    async def ask(self) -> bool | None:
        """Run `RENEW_SCRIPT` once: True when the lease is (again) this try's, False when it is
        lost (`lost` says why, logged once), None when Redis did not answer within
        `CHECK_TIMEOUT_S` (logged by the caller)."""
        if self.lost is not None:
            return False
        sent = self._clock()
        args: list[str | int] = [self.token, int(self.lease_s * 1000), self.attempt,
                                 int(not self._claimed)]
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_S):
                code, value = await self._script(keys=self._keys, args=args)
        except (RedisError, OSError, TimeoutError):
            return None
        text = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
        if int(code) in (1, 2):
            if int(code) == 2 and self._claimed:
                log.warning("job %s: try %d took its lease back (its key was gone, expired or "
                            "lost with Redis's data, and no other try had run)", self.job_id,
                            self.attempt)
            self._claimed, self._unconfirmed = True, False
            self.confirmed_s = max(self.confirmed_s, sent)
            return True
        if self.lost is None:
            self.lost = f"taken by another worker ({_lost_reason(int(code), text)})"
            log.error("job %s: try %d lost its lease: %s; it stops before its next GitHub write "
                      "or provider call", self.job_id, self.attempt, self.lost)
        return False

    async def hold(self) -> None:
        """Renew the lease every third of ``lease_s`` until it is lost; cancel to stop.

        A Redis that does not answer is asked again at the next renewal; that is logged once
        per outage (the pool logs the outage itself: `worker.runtime.redis_checks`).
        """
        told = False
        while True:
            held = await self.ask()
            if held is False:
                return
            if held is None and not told:
                log.warning("job %s: could not renew its lease (Redis did not answer); it "
                            "asks again every %g s", self.job_id, self.lease_s / 3)
            told = held is None
            await asyncio.sleep(self.lease_s / 3)

    async def confirm(self, what: str) -> None:
        """Make sure the lease is this try's before ``what`` (a GitHub write) is sent.

        Raises:
            LeaseLost: another try holds it, or Redis did not answer while the lease confirmed
                last ran out and for one lease more (module docstring).
        """
        waited_from: float | None = None
        while (held := await self.ask()) is None:
            now = self._clock()
            if now < self.held_until_s - MARGIN_S:
                if not self._unconfirmed:
                    self._unconfirmed = True
                    log.warning("job %s: Redis did not answer the lease check before %s; it "
                                "goes on, within the lease confirmed %.1f s ago", self.job_id,
                                what, now - self.confirmed_s)
                return
            waited_from = now if waited_from is None else waited_from
            if now - waited_from >= self.lease_s:
                self.lost = (f"not confirmed, Redis did not answer for "
                             f"{now - self.confirmed_s:.0f} s")
                log.error("job %s: try %d lost its lease: %s; it stops before %s", self.job_id,
                          self.attempt, self.lost, what)
                break
            await asyncio.sleep(RECHECK_S)
        if held is not True:
            raise self._refused()

    async def before_call(self, what: str) -> None:
        """Before a provider call: refuse it when the lease is known lost, and ask Redis when
        the last confirmation is older than half the lease (`confirm`).

        Raises:
            LeaseLost: as `confirm`.
        """
        if self.lost is not None:
            raise self._refused()
        if self._clock() - self.confirmed_s < self.lease_s / 2:
            return
        async with self._lock:  # concurrent calls of a paused process ask once
            if self.lost is not None or self._clock() - self.confirmed_s >= self.lease_s / 2:
                await self.confirm(what)


_LEASE: ContextVar[Lease | None] = ContextVar("llmgate_lease", default=None)


def current_lease() -> Lease | None:
    """The lease of the try the calling code runs in, or None outside one (`fenced`)."""
    return _LEASE.get()


@contextlib.contextmanager
def fenced(lease: Lease) -> Iterator[None]:
    """Within the block (and the tasks it creates), GitHub writes and provider calls are
    checked against ``lease`` (`guard_write`, `worker.evals.llm.guard`)."""
    token = _LEASE.set(lease)
    try:
        with checking(lease.before_call):
            yield
    finally:
        _LEASE.reset(token)


async def guard_write(what: str) -> None:
    """Check the current try's lease right before the GitHub write ``what`` is sent; no-op
    outside a job.

    Raises:
        LeaseLost: the lease is another try's (`Lease.confirm`).
    """
    lease = _LEASE.get()
    if lease is not None:
        await lease.confirm(what)


_STOOD_DOWN: set[str] = set()
_FENCED_MARK = "_llmgate_fenced"


def stand_down(job_id: str) -> None:
    """Mark ``job_id``'s running try as ended by `LeaseLost`: arq's ``finish_job`` of that try
    then changes nothing in Redis (`fence_finished_jobs`)."""
    _STOOD_DOWN.add(job_id)


def fence_finished_jobs(worker_class: type[Worker] = Worker) -> None:
    """Wrap ``worker_class.finish_job`` (idempotent): for a try that stood down, it deletes no
    key and removes nothing from the queue; the try holding the lease finishes the job.

    arq's own would delete the in-progress key (the lease of the try that holds it now), the
    job and its try count, and drop the job from the queue.
    """
    original: Callable[..., Awaitable[None]] = worker_class.finish_job
    if getattr(original, _FENCED_MARK, False):
        return

    @functools.wraps(original)
    async def finish_job(self: Worker, job_id: str, *args: Any, **kwargs: Any) -> None:
        if job_id in _STOOD_DOWN:
            _STOOD_DOWN.discard(job_id)
            return
        await original(self, job_id, *args, **kwargs)

    setattr(finish_job, _FENCED_MARK, True)
    worker_class.finish_job = finish_job  # type: ignore[method-assign]
