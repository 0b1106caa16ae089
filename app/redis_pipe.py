"""One Redis connection that pipelines the commands of concurrent deliveries.

redis-py's asyncio client takes a pooled connection per command, packs it in Python, waits for
its reply alone through a ``StreamReader`` and bounds it with a timer: about 130 us of CPU per
command on the benchmark machine, more than the rest of a delivery's Redis work. ``RedisPipe``
keeps one connection instead. Commands issued in the same event-loop pass go out in one write
at the end of it; replies are parsed by ``hiredis`` straight from the socket's protocol callback
and settle the callers in order (Redis answers a connection's commands in the order sent,
redis.io/docs/latest/develop/use/pipelining/). One watchdog timer, not one per command, fails
the commands of a connection whose oldest command is past its deadline.

Connecting, ``AUTH``, ``SELECT``, TLS and Unix sockets are left to redis-py's own connection,
taken from the app's pool; once it is connected, the pipe reads and writes its transport itself.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import hiredis
from redis._parsers import BaseParser
from redis.asyncio import ConnectionPool
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse

#: hiredis' "no complete reply yet" marker (RESP2 has no value it could be confused with).
_NOT_ENOUGH_DATA = object()


def pack(*args: str | bytes | int) -> bytes:
    """Return one command in the Redis protocol: an array of bulk strings (RESP).

    Strings are UTF-8 encoded and integers written in decimal, as redis-py does
    (redis.io/docs/latest/develop/reference/protocol-spec/#bulk-strings).
    """
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(parts)


class RedisPipe:
    """Run packed commands over one connection, batching the ones issued together.

    A command issued while nothing else is unanswered is written at once; one issued while
    others are waiting goes out with the rest of its event-loop pass in one write.

    Args:
        pool: the app's redis-py pool; the pipe takes one connection from it on first use and
            keeps it (``pool.disconnect()``, e.g. at shutdown, closes it; the next use
            reconnects).
        reply_timeout_s: the default deadline of a command, in seconds from ``execute``
            (connecting included); a connection whose oldest command is past its deadline is
            dropped and all its commands fail.
    """

    def __init__(self, pool: ConnectionPool, reply_timeout_s: float) -> None:
        """Keep the pool; nothing is taken from it or sent until the first ``execute``."""
        self.pool = pool
        self._reply_timeout_s = reply_timeout_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connection: AbstractConnection | None = None
        self._wire: _Wire | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._unsent: list[bytes] = []
        #: Every unanswered command, oldest first: (its caller's future, its deadline).
        self._calls: deque[tuple[asyncio.Future[Any], float]] = deque()
        self._flush_due = False
        self._watchdog: asyncio.TimerHandle | None = None

    def deadline(self) -> float:
        """Return the event-loop time ``reply_timeout_s`` seconds from now (for ``execute``)."""
        return self._running_loop().time() + self._reply_timeout_s

    async def execute(self, command: bytes, deadline: float | None = None) -> Any:
        """Send one packed command (see ``pack``) and return its reply.

        Args:
            command: the command in RESP.
            deadline: event-loop time (``deadline()``) by which the reply must be in;
                default ``reply_timeout_s`` from now. Share one deadline between the commands
                of one task to bound them together.

        Raises:
            redis.exceptions.ResponseError: Redis answered with an error (e.g. ``NOSCRIPT``).
            redis.exceptions.RedisError: the connection failed or the deadline passed; the
                command may or may not have run.
        """
        loop = self._running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._calls.append((future, loop.time() + self._reply_timeout_s
                            if deadline is None else deadline))
        wire = self._wire
        if len(self._calls) == 1 and wire is not None and not wire.transport.is_closing():
            wire.transport.write(command)  # an idle connection: no batch to wait for
        else:
            self._unsent.append(command)
            if not self._flush_due:
                self._flush_due = True
                loop.call_soon(self._flush)
        if self._watchdog is None:
            self._watchdog = loop.call_at(self._calls[0][1], self._check_deadline)
        return await future

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        """Return the event loop, looked up once (each lookup costs a ``getpid`` here)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def _flush(self) -> None:
        """Write what was issued since the last flush in one go, connecting first if needed."""
        self._flush_due = False
        if not self._unsent:
            return
        if self._wire is not None and self._wire.transport.is_closing():
            # Lost, and not told yet: what was sent on it can no longer be answered in order.
            self._fail_all(RedisConnectionError("the Redis connection is closing"))
            return
        if self._wire is None:
            if self._connecting is None:
                self._connecting = self._running_loop().create_task(self._connect())
            return
        unsent, self._unsent = self._unsent, []
        self._wire.transport.write(b"".join(unsent))

    async def _connect(self) -> None:
        """Connect redis-py's connection (bounded by the oldest deadline), then take it over."""
        try:
            async with asyncio.timeout_at(self._calls[0][1] if self._calls else None):
                connection = self._connection
                if connection is None:
                    taken = self.pool.get_available_connection()  # type: ignore[no-untyped-call]
                    connection = self._connection = taken
                if connection.is_connected:  # a stale stream left by a lost connection
                    await connection.disconnect(nowait=True)
                await connection.connect()
                wire = _Wire(self, connection)
        except BaseException as exc:  # every caller must get an answer
            self._connecting = None
            self._fail_all(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        self._connecting = None
        self._wire = wire
        self._flush()

    def _check_deadline(self) -> None:
        """Watchdog: drop the connection when its oldest command is past its deadline."""
        self._watchdog = None
        if not self._calls:
            return
        loop = self._running_loop()
        deadline = self._calls[0][1]
        if deadline > loop.time() or self._connecting is not None:  # connecting has its own
            self._watchdog = loop.call_at(max(deadline, loop.time() + 0.01),
                                          self._check_deadline)
            return
        self._fail_all(TimeoutError(f"no reply from Redis before the deadline "
                                    f"({self._reply_timeout_s} s)"))

    def _fail_all(self, cause: BaseException) -> None:
        """Drop the connection and fail every unanswered command with a ``ConnectionError``."""
        wire, self._wire = self._wire, None
        if wire is not None:
            wire.detach()
        calls, self._calls, self._unsent = self._calls, deque(), []
        for future, _ in calls:
            if not future.done():
                future.set_exception(RedisConnectionError(f"Redis round trip failed: {cause!r}"))

    def _settle(self, reply: Any) -> None:
        """Hand one reply to the oldest unanswered command's caller.

        Error replies arrive as redis-py's exceptions (``ResponseError`` and its kin, or e.g.
        ``BusyLoadingError`` for ``LOADING``), raised to the caller as redis-py would; the
        connection stays usable.
        """
        if not self._calls:
            self._fail_all(InvalidResponse("Redis sent a reply nobody asked for"))
            return
        future, _ = self._calls.popleft()
        if future.done():  # the caller gave up (timeout, disconnect)
            return
        if isinstance(reply, Exception):  # an error reply, e.g. NOSCRIPT, NOPERM, LOADING
            future.set_exception(reply)
        else:
            future.set_result(reply)

    def _lost(self, wire: _Wire, cause: BaseException | None) -> None:
        """The connection of ``wire`` closed: fail its commands; the next one reconnects."""
        if self._wire is wire:
            self._fail_all(cause or RedisConnectionError("Redis closed the connection"))


class _Wire(asyncio.Protocol):
    """The protocol on a connected redis-py connection's transport: replies go to the pipe.

    redis-py's own stream protocol stays informed of the connection's end, so its
    ``disconnect()`` (e.g. the pool's, at shutdown) still completes.
    """

    def __init__(self, pipe: RedisPipe, connection: AbstractConnection) -> None:
        """Take over the transport of ``connection`` (connected)."""
        writer = connection._writer
        if writer is None:
            raise RedisConnectionError("Redis connection has no transport")
        self.transport = writer.transport
        self._stream_protocol = self.transport.get_protocol()
        self._pipe: RedisPipe | None = pipe
        self._reader = hiredis.Reader(protocolError=InvalidResponse,
                                      replyError=BaseParser.parse_error,
                                      notEnoughData=_NOT_ENOUGH_DATA)
        self.transport.set_protocol(self)

    def detach(self) -> None:
        """Stop delivering replies to the pipe and close the connection."""
        self._pipe = None
        self.transport.abort()

    def data_received(self, data: bytes) -> None:
        """Parse complete replies and settle their commands, oldest first."""
        pipe = self._pipe
        if pipe is None:
            return
        reader = self._reader
        reader.feed(data)
        try:
            while (reply := reader.gets()) is not _NOT_ENOUGH_DATA:
                pipe._settle(reply)
                if self._pipe is None:  # a stray reply dropped the connection
                    return
        except InvalidResponse as exc:
            pipe._fail_all(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        """Tell redis-py's stream protocol, then the pipe."""
        self._stream_protocol.connection_lost(exc)
        if self._pipe is not None:
            self._pipe._lost(self, exc)
