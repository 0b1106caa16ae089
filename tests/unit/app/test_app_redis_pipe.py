"""``RedisPipe`` on a real redis-server: each reply reaches its caller, failures stay contained."""

from __future__ import annotations

import asyncio
import socket
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.asyncio import ConnectionPool
from redis.asyncio.connection import Connection
from redis.exceptions import AuthenticationError, RedisError, ResponseError

from app.redis_pipe import RedisPipe, pack
from tests.conftest import free_port, wait_for_port


@pytest.fixture()
async def pool(redis_url: str) -> AsyncIterator[ConnectionPool]:
    """A redis-py pool on the test database, closed after the test."""
    made = ConnectionPool.from_url(redis_url)
    yield made
    await made.aclose()


@pytest.mark.parametrize("args", [
    ("PING",),
    ("SET", "k\u00e9y", b"\x00\xff\r\n", "EX", 60),
    ("EVALSHA", "a" * 40, 2, "k1", "k2", -5, 0, ""),
])
def test_pack_matches_redis_py(args: tuple[str | bytes | int, ...]) -> None:
    assert pack(*args) == b"".join(Connection().pack_command(*args))


async def test_concurrent_commands_each_get_their_own_reply_over_one_connection(
        pool: ConnectionPool) -> None:
    pipe = RedisPipe(pool, reply_timeout_s=5.0)
    replies = await asyncio.gather(*(pipe.execute(pack("ECHO", f"m{i}")) for i in range(300)))
    assert replies == [f"m{i}".encode() for i in range(300)]
    client_ids = await asyncio.gather(*(pipe.execute(pack("CLIENT", "ID")) for _ in range(50)))
    assert len(set(client_ids)) == 1


async def test_an_error_reply_fails_only_its_caller(pool: ConnectionPool) -> None:
    pipe = RedisPipe(pool, reply_timeout_s=5.0)
    await pipe.execute(pack("SET", "text", "not a number"))
    results = await asyncio.gather(pipe.execute(pack("ECHO", "before")),
                                   pipe.execute(pack("INCR", "text")),
                                   pipe.execute(pack("ECHO", "after")), return_exceptions=True)
    assert results[0] == b"before" and results[2] == b"after"
    assert isinstance(results[1], ResponseError)
    assert await pipe.execute(pack("ECHO", "still usable")) == b"still usable"


async def test_a_dropped_connection_fails_one_call_then_reconnects(
        pool: ConnectionPool, redis_url: str) -> None:
    pipe = RedisPipe(pool, reply_timeout_s=5.0)
    client_id = await pipe.execute(pack("CLIENT", "ID"))
    with redis.Redis.from_url(redis_url) as admin:
        assert admin.client_kill_filter(_id=client_id) == 1
    with pytest.raises(RedisError):
        await pipe.execute(pack("PING"))
    assert await pipe.execute(pack("PING")) == b"PONG"


async def test_a_caller_that_gives_up_does_not_shift_later_replies(
        pool: ConnectionPool) -> None:
    pipe = RedisPipe(pool, reply_timeout_s=5.0)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(pipe.execute(pack("BLPOP", "empty-list", "0.3")), 0.05)
    assert await pipe.execute(pack("ECHO", "next")) == b"next"


async def test_unreachable_redis_fails_with_a_redis_error() -> None:
    pool = ConnectionPool.from_url(f"redis://127.0.0.1:{free_port()}/0",
                                   socket_connect_timeout=1.0)
    pipe = RedisPipe(pool, reply_timeout_s=5.0)
    with pytest.raises(RedisError):
        await pipe.execute(pack("PING"))
    await pool.aclose()


@pytest.fixture()
def silent_server() -> Iterator[int]:
    """A loopback TCP port that accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield int(listener.getsockname()[1])


async def test_a_server_that_never_answers_fails_every_waiting_call_after_the_timeout(
        silent_server: int) -> None:
    pool = ConnectionPool.from_url(f"redis://127.0.0.1:{silent_server}/0")
    pipe = RedisPipe(pool, reply_timeout_s=0.2)
    started = asyncio.get_running_loop().time()
    results = await asyncio.gather(*(pipe.execute(pack("PING")) for _ in range(3)),
                                   return_exceptions=True)
    elapsed_s = asyncio.get_running_loop().time() - started
    assert all(isinstance(result, RedisError) for result in results)
    assert 0.2 <= elapsed_s < 2.0
    await pool.aclose()


async def test_an_error_reply_of_the_connection_kind_is_raised_not_returned(
        pool: ConnectionPool) -> None:
    """redis-py maps WRONGPASS to AuthenticationError, a ConnectionError, not a ResponseError."""
    pipe = RedisPipe(pool, reply_timeout_s=5.0)
    with pytest.raises(AuthenticationError, match="invalid username-password pair"):
        await pipe.execute(pack("AUTH", "nobody", "wrong"))
    assert await pipe.execute(pack("ECHO", "still usable")) == b"still usable"


async def test_a_shared_deadline_bounds_the_call_whatever_the_default(silent_server: int) -> None:
    pool = ConnectionPool.from_url(f"redis://127.0.0.1:{silent_server}/0")
    pipe = RedisPipe(pool, reply_timeout_s=30.0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(RedisError):
        await pipe.execute(pack("PING"), loop.time() + 0.2)
    assert 0.2 <= loop.time() - started < 2.0
    await pool.aclose()


async def test_pool_disconnect_closes_the_pipe_promptly_and_the_pipe_reconnects(
        pool: ConnectionPool) -> None:
    """Shutdown (``pool.disconnect()``) must not wait for redis-py's own timeout."""
    pipe = RedisPipe(pool, reply_timeout_s=5.0)
    first = await pipe.execute(pack("CLIENT", "ID"))
    await asyncio.wait_for(pool.disconnect(), 0.5)
    second = await pipe.execute(pack("CLIENT", "ID"))
    assert isinstance(first, int) and isinstance(second, int) and second != first


@pytest.fixture()
def own_redis(tmp_path: Path) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    """Start (and restart) a private redis-server on one free port: ``start()`` -> process."""
    port = free_port()
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        procs.append(subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(tmp_path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for_port(port)
        return procs[-1]

    start.port = port  # type: ignore[attr-defined]
    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


async def test_a_restarted_redis_fails_the_calls_in_flight_then_is_used_again(
        own_redis: Any) -> None:
    server = own_redis()
    pool = ConnectionPool.from_url(f"redis://127.0.0.1:{own_redis.port}/0")
    pipe = RedisPipe(pool, reply_timeout_s=5.0)
    assert await pipe.execute(pack("SET", "k", "before")) == b"OK"
    server.terminate()
    server.wait(timeout=10)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(RedisError):
        await pipe.execute(pack("PING"))
    assert loop.time() - started < 2.0  # the lost connection is noticed, not timed out
    own_redis()
    assert await pipe.execute(pack("PING")) == b"PONG"
    assert await pipe.execute(pack("GET", "k")) is None  # a new server, not the old reply
    await pool.aclose()


async def test_a_reply_nobody_asked_for_drops_the_connection() -> None:
    """A server that answers every command twice: the stray reply must not reach a caller."""
    connections = 0

    async def answer_twice(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while await reader.read(65536):
            writer.write(b"+OK\r\n+STRAY\r\n")
        writer.close()

    server = await asyncio.start_server(answer_twice, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = ConnectionPool.from_url(f"redis://127.0.0.1:{port}/0", lib_name=None,
                                   lib_version=None)
    pipe = RedisPipe(pool, reply_timeout_s=5.0)
    try:
        assert await pipe.execute(pack("PING")) == b"OK"
        await asyncio.sleep(0.05)  # the stray reply arrives and drops the connection
        assert await pipe.execute(pack("PING")) == b"OK"
        assert connections == 2
    finally:
        await pool.aclose()
        server.close()
        await server.wait_closed()
