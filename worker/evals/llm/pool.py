"""Provider processes: send a run's model calls from a few processes instead of its one.

litellm spends about 5 ms of CPU per chat call even with worker/evals/llm/client.py's cuts, in
Python, under one GIL: one process sends at most ~200 calls/s, which is exactly what concurrency 20
at 100 ms latency asks for, so a large run in one process is CPU bound. Provider processes
(``python -m worker.evals.llm.serve``) each run an event loop with litellm and send many calls at
once. The run's process keeps everything that decides a run: the response cache, the budget, the
retries, the concurrency limit (worker/evals/llm/provider.py), the ``api_base`` check and the key
lookup (worker/evals/llm/client.py). A provider process makes only the one HTTP request of an
attempt and returns the answer or the mapped error.

When: `PROCESSES_ENV` sets how many (``auto``, the default: one per usable CPU core, at most
`AUTO_MAX`, and none on one core; ``0`` turns them off). A number starts them in the background
when a run expects at least `MIN_CALLS` provider calls (`expect`); ``auto`` starts them only when
they pay (`decide`): the litellm CPU they take off the run's one core must exceed the CPU of
importing litellm in each of them. Until one has imported litellm (a few seconds) calls go from
the run's process. The decision is logged at INFO (``llmgate run --verbose`` shows it). They
serve the event loop that started them (the worker's for its lifetime; one CLI run) and exit
when their stdin closes (the parent exited); `shutdown` (the CLI, at the end of a run on every
way out) and an exit handler stop and reap them, so none outlives its parent.
They see the worker's environment as it was when they started.

Protocol (worker/evals/llm/serve.py is the other end): one JSON document per line. The child
reads ``{"environ": {...}}`` once, then ``{"id", "op": "chat" | "embed", "args"}`` and
``{"cancel": id}`` on stdin; it writes ``{"ready": true}`` once, then ``{"id", "ok": answer}``
or ``{"id", "error": {"kind", "message", "status", "retryable", "retry_after_s", "field",
"headers"}}`` on its
original stdout (fd 1 is pointed at stderr, so a library's print cannot corrupt the channel).

Secrets: a provider process starts with a few harmless variables (`start_environ`), makes
itself non-dumpable like the worker, then receives the worker's environment without the
worker's own secrets (`provider_environ`: no GitHub App key, webhook secret, Redis URL or
``LLMGATE_*``), from which litellm reads provider keys that ``api_key_env`` does not name. The
key of a call travels in its ``args`` between our own processes, never into a log.

Failure: a provider process that exits fails its calls in flight with a retryable provider
error (retried like a dropped connection), is logged and not used again; with none left, calls
go from the run's process; when every process of a pool has exited, the next large run starts
a new pool.

Measured on 2 cores (bench/eval_overhead.py, 500 calls at concurrency 20, the local server on
the same cores): the run's process spends ~1 ms of CPU per call instead of ~7, the provider
processes ~6.5 ms (the same litellm work plus ~1 ms of piping and scheduling), and the wall time
was ~7% shorter (ratio 1.55 against 1.66, mean of 5 interleaved runs each): two cores are nearly
saturated either way. They pay most where the run's one process is the limit (about 150
calls/s) and more cores are free.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import logging
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import orjson

from worker.evals.llm.retry import ProviderError
from worker.security.redact import secrets_from_environ

#: The worker variable: ``auto`` (default), or how many provider processes (0 = none).
PROCESSES_ENV = "LLMGATE_PROVIDER_PROCESSES"
#: Most provider processes ``auto`` starts (each holds ~200 MB: litellm and its imports).
AUTO_MAX = 4
#: Most provider processes a number may ask for.
MAX_PROCESSES = 16
#: Provider calls a run must expect before provider processes are started for it: ~1 s of
#: litellm CPU in one process, about what starting one provider process costs.
MIN_CALLS = 200
#: CPU the run's process spends on one provider call in litellm, seconds: ~7 ms measured by
#: bench/eval_overhead.py on 2 cores (module docstring), of which ~1 ms stays in the run's process.
PER_CALL_CPU_S = 0.007
#: Of it, what a call still costs the run's process when a provider process sends it, seconds.
PIPED_CALL_CPU_S = 0.001
#: CPU a provider process spends importing litellm, seconds, when this process has not measured
#: its own import yet (3-4 s idle on the 2-core machine of the issue 20 bench).
START_CPU_S = 3.0
#: Longest line of the protocol, bytes (a large embeddings answer or prompt fits).
MAX_LINE_BYTES = 1 << 28
#: How long a provider process may take to import litellm and say it is ready, seconds.
START_TIMEOUT_S = 120.0
#: Extra time over a call's own timeout before the run's process gives up on an answer, s.
ANSWER_GRACE_S = 30.0

#: Variables a provider process starts with (the rest arrive on its stdin once it is hardened).
START_NAMES = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV")
#: The worker's own variables (names, and prefixes) that provider processes never get.
WORKER_ONLY = frozenset({"GITHUB_APP_ID", "GITHUB_APP_PRIVATE_KEY", "GITHUB_APP_PRIVATE_KEY_FILE",
                         "GITHUB_WEBHOOK_SECRET", "GITHUB_WEBHOOK_SECRET_PREVIOUS"})
WORKER_ONLY_PREFIXES = ("LLMGATE_", "REDIS_")

log = logging.getLogger("llmgate.llm_pool")


def process_count(environ: Mapping[str, str], cpus: int) -> int:
    """Return how many provider processes `PROCESSES_ENV` asks for on ``cpus`` usable cores.

    Raises:
        ValueError: the value is neither ``auto`` nor a whole number 0-`MAX_PROCESSES`.
    """
    value = environ.get(PROCESSES_ENV, "").strip().lower() or "auto"
    if value == "auto":
        return min(cpus, AUTO_MAX) if cpus >= 2 else 0
    if not value.isdigit() or int(value) > MAX_PROCESSES:
        raise ValueError(f"{PROCESSES_ENV} must be auto or a number of provider processes "
                         f"0-{MAX_PROCESSES}, not {value!r}")
    return int(value)


def decide(calls: int, count: int, cpus: int, start_cpu_s: float,
           forced: bool = False) -> tuple[int, str]:
    """Return (provider processes to start, why) for a run expecting ``calls`` provider calls.

    ``count`` processes are allowed (`process_count`); ``forced`` when `PROCESSES_ENV` named a
    number, which starts them from `MIN_CALLS` calls on. Otherwise (``auto``) they pay when the
    CPU they take off the run's process, ``calls * (PER_CALL_CPU_S - PIPED_CALL_CPU_S)``, spread
    over ``min(count, cpus)`` cores, saves more core-seconds than starting them costs,
    ``count * start_cpu_s`` (each imports litellm, ``start_cpu_s`` of CPU). The wall time saved
    is at most the run process's litellm CPU less what the other cores do of it; the start-up
    CPU competes with the run on the same cores.
    """
    if count == 0:
        return 0, f"no provider processes: {PROCESSES_ENV} is 0 or there is one usable core"
    if calls < MIN_CALLS:
        return 0, f"no provider processes: {calls} calls expected, fewer than {MIN_CALLS}"
    if forced:
        return count, f"{count} provider processes: {PROCESSES_ENV} asks for them"
    offloaded_s = calls * (PER_CALL_CPU_S - PIPED_CALL_CPU_S)
    saved_s = offloaded_s * (1 - 1 / min(count, cpus)) if cpus > 1 else 0.0
    cost_s = count * start_cpu_s
    figures = (f"{calls} calls x {PER_CALL_CPU_S * 1000:.0f} ms of litellm CPU would save "
               f"~{saved_s:.1f} s of the run's core; {count} x {start_cpu_s:.1f} s to import "
               f"litellm costs {cost_s:.1f} s ({cpus} usable cores)")
    if saved_s <= cost_s:
        return 0, f"no provider processes: {figures}"
    return count, f"{count} provider processes: {figures}"


def start_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """Return the variables a provider process starts with: `START_NAMES` holding no secret."""
    secrets = set(secrets_from_environ(environ))
    return {name: environ[name] for name in START_NAMES
            if name in environ and environ[name] not in secrets}


def provider_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """Return the environment a provider process gets: ``environ`` without the worker's own
    variables (`WORKER_ONLY`, `WORKER_ONLY_PREFIXES`)."""
    return {name: value for name, value in environ.items()
            if name not in WORKER_ONLY and not name.startswith(WORKER_ONLY_PREFIXES)}


def usable_cpus() -> int:
    """Return the CPU cores this process may run on (its affinity, else the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class _Child:
    """One provider process: its pipes and its calls in flight (id -> future)."""

    def __init__(self, popen: subprocess.Popen[bytes], reader: asyncio.StreamReader,
                 writer: asyncio.WriteTransport) -> None:
        self.popen = popen
        self.reader = reader
        self.writer = writer
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.alive = True

    def send(self, message: dict[str, Any]) -> None:
        self.writer.write(orjson.dumps(message) + b"\n")


class ProviderPool:
    """The provider processes of one event loop (see the module docstring).

    Attributes:
        count: processes asked for.
        sent: calls sent to them so far.
        loop: the event loop they serve.
        children: the processes started (`live` are those that answer).
        closed: True once `close` was called (their exits are then not logged).
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self.sent = 0
        self.closed = False
        self.loop = asyncio.get_running_loop()
        self.children: list[_Child] = []
        self._ids = itertools.count(1)
        self._starting: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Start the processes in the background (once)."""
        if self._starting is None:
            self._starting = self.loop.create_task(self._spawn_all())

    async def wait_ready(self) -> int:
        """Start the processes if needed, wait until they are up; return how many are alive."""
        self.start()
        assert self._starting is not None
        await asyncio.shield(self._starting)
        return len(self.live())

    def live(self) -> list[_Child]:
        """The processes that answer calls."""
        return [child for child in self.children if child.alive]

    async def call(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        """Send one call to the process with the fewest calls in flight; return its answer.

        Raises:
            ProviderError: the provider's error, or a retryable one when the process exited
                or did not answer within the call's timeout plus `ANSWER_GRACE_S`.
        """
        children = self.live()
        if not children:
            raise ProviderError("provider", "no provider process is running", retryable=True)
        child = min(children, key=lambda c: len(c.pending))
        call_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = self.loop.create_future()
        child.pending[call_id] = future
        limit = float(args.get("kwargs", {}).get("timeout", 600)) + ANSWER_GRACE_S
        try:
            child.send({"id": call_id, "op": op, "args": args})
            self.sent += 1
            return await asyncio.wait_for(future, limit)
        except TimeoutError:
            with contextlib.suppress(Exception):
                child.send({"cancel": call_id})
            raise ProviderError("timeout", f"the provider process gave no answer in {limit:g} s",
                                retryable=True) from None
        except asyncio.CancelledError:
            if child.alive and call_id in child.pending:
                with contextlib.suppress(Exception):
                    child.send({"cancel": call_id})
            raise
        finally:
            child.pending.pop(call_id, None)

    def spent(self) -> bool:
        """True when the processes were started and none answers any more."""
        return self._starting is not None and self._starting.done() and not self.live()

    def close(self) -> None:
        """Stop every process (calls in flight fail when their pipes close)."""
        self.closed = True
        for child in self.children:
            child.alive = False
            if child.popen.poll() is None:
                child.popen.terminate()
            with contextlib.suppress(Exception):
                child.writer.close()

    async def _spawn_all(self) -> None:
        results = await asyncio.gather(*(self._spawn() for _ in range(self.count)),
                                       return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                log.warning("a provider process did not start: %s", result)

    async def _spawn(self) -> None:
        popen = subprocess.Popen([sys.executable, "-m", "worker.evals.llm.serve"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 env=start_environ(os.environ))
        _LIVE.add(popen)
        assert popen.stdin is not None and popen.stdout is not None
        reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        await self.loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                          popen.stdout)
        writer, _ = await self.loop.connect_write_pipe(asyncio.Protocol, popen.stdin)
        child = _Child(popen, reader, writer)
        child.send({"environ": provider_environ(os.environ)})
        try:
            first = await asyncio.wait_for(reader.readline(), START_TIMEOUT_S)
            if orjson.loads(first or b"{}").get("ready") is not True:
                raise RuntimeError(f"exited with code {popen.wait()}")
        except BaseException:
            child.alive = False
            popen.kill()
            raise
        if self.closed:  # closed while this one was starting
            popen.terminate()
            return
        self.children.append(child)
        task = self.loop.create_task(self._read(child))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _read(self, child: _Child) -> None:
        try:
            while line := await child.reader.readline():
                self._resolve(child, orjson.loads(line))
        except ValueError as err:  # not JSON, or longer than MAX_LINE_BYTES
            log.warning("a provider process wrote an unreadable answer: %s", err)
        child.alive = False
        if child.popen.poll() is None:
            child.popen.kill()
        code = await self.loop.run_in_executor(None, child.popen.wait)
        _LIVE.discard(child.popen)
        if not self.closed:
            log.warning("provider process %d exited with code %d", child.popen.pid, code)
        for future in child.pending.values():
            if not future.done():
                future.set_exception(ProviderError(
                    "provider", f"the provider process exited (code {code}) before answering",
                    retryable=True))

    @staticmethod
    def _resolve(child: _Child, message: dict[str, Any]) -> None:
        future = child.pending.get(message.get("id", -1))
        if future is None or future.done():
            return  # cancelled or timed out meanwhile
        if "error" in message:
            error = message["error"]
            future.set_exception(ProviderError(
                error["kind"], error["message"], status=error.get("status"),
                retryable=bool(error.get("retryable")), retry_after_s=error.get("retry_after_s"),
                field=str(error.get("field") or ""),
                headers={str(k): str(v) for k, v in (error.get("headers") or {}).items()}))
        else:
            future.set_result(message["ok"])


_pool: ProviderPool | None = None
#: Every provider process started and not yet reaped (stopped when this process exits).
_LIVE: set[subprocess.Popen[bytes]] = set()


def active() -> ProviderPool | None:
    """Return the running event loop's pool when one of its processes is up, else None."""
    pool = _pool
    if pool is None or not pool.live():
        return None
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return pool if pool.loop is loop else None


def ensure(environ: Mapping[str, str] = os.environ) -> ProviderPool | None:
    """Return the running loop's pool, starting its processes in the background if needed.

    None when `PROCESSES_ENV` asks for none (or is invalid: logged as an error, none started).
    A pool of another (finished) event loop, or one whose processes all exited, is replaced.
    """
    try:
        count = process_count(environ, usable_cpus())
    except ValueError as err:
        log.error("%s: no provider processes started", err)
        return None
    return _ensure(count)


def _ensure(count: int) -> ProviderPool | None:
    global _pool
    loop = asyncio.get_running_loop()
    if _pool is not None and _pool.loop is loop and not _pool.spent():
        return _pool
    if _pool is not None:
        _pool.close()
        _pool = None
    if count == 0:
        return None
    _pool = ProviderPool(count)
    _pool.start()
    return _pool


def expect(calls: int, environ: Mapping[str, str] = os.environ) -> ProviderPool | None:
    """Start provider processes when a run expecting ``calls`` provider calls gains by them
    (`decide`; logged at INFO); return the running loop's pool, or None."""
    if active() is not None:
        return active()
    cpus = usable_cpus()
    try:
        count = process_count(environ, cpus)
    except ValueError as err:
        log.error("%s: no provider processes started", err)
        return None
    forced = (environ.get(PROCESSES_ENV, "").strip().lower() or "auto") != "auto"
    measured = client_import_cpu_s()
    start, why = decide(calls, count, cpus, measured or START_CPU_S, forced)
    log.info("%s", why)
    return _ensure(start) if start else None


def client_import_cpu_s() -> float | None:
    """CPU this process spent importing litellm, seconds (worker/evals/llm/client.py), if done."""
    from worker.evals.llm import client

    return client.import_cpu_s


async def shutdown(grace_s: float = 5.0) -> None:
    """Stop every provider process of this process and reap it (`close`, then wait).

    Waits up to ``grace_s`` seconds for each to exit after SIGTERM, then kills it; returns once
    none is left unreaped, so no process of a run outlives it.
    """
    global _pool
    if _pool is not None:
        starting = _pool._starting
        _pool.close()
        if starting is not None and not starting.done():
            starting.cancel()
            with contextlib.suppress(BaseException):
                await starting
        _pool = None
    await asyncio.to_thread(_reap_all, grace_s)


def _reap_all(grace_s: float) -> None:
    for popen in list(_LIVE):
        if popen.poll() is None:
            popen.terminate()
    for popen in list(_LIVE):
        try:
            popen.wait(grace_s)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()
        _LIVE.discard(popen)


@atexit.register
def _stop_all() -> None:
    _reap_all(5.0)
