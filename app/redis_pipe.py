"""One Redis connection that pipelines the commands of concurrent deliveries.

redis-py's asyncio client takes a pooled connection per command, packs it in Python and waits
for its reply alone: about 130 us of CPU per command on the benchmark machine, more than the
rest of a delivery's Redis work, and under load one connection (and one socket write and read)
per delivery in flight. ``RedisPipe`` instead keeps one connection and one driver task: commands
issued while a batch is on the wire wait for it to finish, then go out together in one write;
replies come back in order (Redis answers a connection's commands in the order sent,
redis.io/docs/latest/develop/use/pipelining/). Connecting, ``AUTH``, ``SELECT``, TLS and Unix
sockets are left to redis-py's own connection, taken from the app's pool.
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import ConnectionPool
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError


def pack(*args: str | bytes | int) -> bytes:
    """Return one command in the Redis protocol: an array of bulk strings (RESP).

    Strings are UTF-8 encoded and integers written in decimal, as redis-py does
    (redis.io/docs/latest/develop/reference/protocol-spec/#bulk-strings).
    """
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts += (b"$%d\r\n" % len(data), data, b"\r\n")
    return b"".join(parts)


class RedisPipe:
    """Run packed commands over one connection, batching the ones that arrive together.

    Args:
        pool: the app's redis-py pool; the pipe takes one connection from it on first use and
            keeps it (``pool.disconnect()``, e.g. at shutdown, closes it; the next use
            reconnects).
        reply_timeout_s: bound on one batch's round trip, in seconds; past it the connection
            is dropped and the batch fails.
    """

    def __init__(self, pool: ConnectionPool, reply_timeout_s: float) -> None:
        """Keep the pool; nothing is taken from it or sent until the first ``execute``."""
        self.pool = pool
        self._reply_timeout_s = reply_timeout_s
        self._connection: AbstractConnection | None = None
        self._waiting: list[tuple[bytes, asyncio.Future[Any]]] = []
        self._driver: asyncio.Task[None] | None = None

    async def execute(self, command: bytes) -> Any:
        """Send one packed command (see ``pack``) and return its reply.

        Raises:
            redis.exceptions.ResponseError: Redis answered with an error (e.g. ``NOSCRIPT``).
            redis.exceptions.RedisError: the connection failed or the round trip took longer
                than ``reply_timeout_s``; the command may or may not have run.
        """
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.append((command, future))
        if self._driver is None or self._driver.done():
            self._driver = asyncio.create_task(self._drive())
        return await future

    async def _drive(self) -> None:
        """Send what waits as one batch, settle its replies; repeat until nothing waits."""
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                async with asyncio.timeout(self._reply_timeout_s):
                    await self._round_trip(batch)
            except asyncio.CancelledError as exc:
                _fail(batch + self._waiting, exc)
                raise
            except Exception as exc:  # every caller must get an answer
                # RedisError, OSError and TimeoutError in practice. Replies may be out of step
                # with the batch now, so the connection is dropped and made anew.
                if self._connection is not None:
                    await self._connection.disconnect(nowait=True)
                _fail(batch, exc)

    async def _round_trip(self, batch: list[tuple[bytes, asyncio.Future[Any]]]) -> None:
        """Write the batch in one go, then read one reply per command, in order."""
        connection = self._connection
        if connection is None:
            taken = self.pool.get_available_connection()  # type: ignore[no-untyped-call]
            connection = self._connection = taken
        if not connection.is_connected:
            await connection.connect()
        await connection.send_packed_command([command for command, _ in batch],
                                             check_health=False)
        for _, future in batch:
            try:
                reply = await connection.read_response()
            except ResponseError as error:  # an error reply; the connection stays usable
                if not future.done():
                    future.set_exception(error)
                continue
            if not future.done():  # the caller may have given up (timeout, disconnect)
                future.set_result(reply)


def _fail(batch: list[tuple[bytes, asyncio.Future[Any]]], cause: BaseException) -> None:
    """Fail every unsettled future of ``batch`` with a ``ConnectionError`` naming ``cause``."""
    for _, future in batch:
        if not future.done():
            future.set_exception(RedisConnectionError(f"Redis round trip failed: {cause!r}"))
