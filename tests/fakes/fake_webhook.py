"""A webhook receiver for the notification tests: a Starlette app under uvicorn on 127.0.0.1.

It records every request (path, headers, body) and answers from a script: each entry of
``answers`` is used once, in order (``(status, headers)``, e.g. ``(429, {"Retry-After": "1"})``),
then ``default`` (200 unless told). ``hang_s`` holds every answer that long (a receiver that
never answers in time). Paths are free: one receiver serves the Slack and the JSON URL
(``/slack/T0/B0/secret-path``, ``/hook``).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


@dataclass(frozen=True)
class Received:
    """One request the receiver got: its path, headers (lower-case names) and body."""

    path: str
    headers: dict[str, str]
    body: bytes
    at_monotonic: float


@dataclass
class FakeWebhook:
    """The receiver's script and record (module docstring)."""

    answers: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    default: int = 200
    hang_s: float = 0.0
    received: list[Received] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        with self._lock:
            self.received.append(Received(request.url.path, dict(request.headers), body,
                                          time.monotonic()))
            status, headers = self.answers.pop(0) if self.answers else (self.default, {})
        if self.hang_s:
            await anyio.sleep(self.hang_s)
        return Response(b"ok" if status < 300 else b"no", status, headers)

    def app(self) -> Starlette:
        """The Starlette app: every path, POST only."""
        return Starlette(routes=[Route("/{path:path}", self.handle, methods=["POST"])])


class FakeWebhookServer:
    """Serve a `FakeWebhook` with uvicorn on a free port of 127.0.0.1 from a thread."""

    def __init__(self, fake: FakeWebhook | None = None) -> None:
        self.fake = fake or FakeWebhook()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = int(self._sock.getsockname()[1])
        config = uvicorn.Config(self.fake.app(), log_level="warning", access_log=False,
                                lifespan="off", loop="asyncio")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run,
                                        kwargs={"sockets": [self._sock]}, daemon=True)

    def url(self, path: str) -> str:
        """Return ``http://127.0.0.1:PORT/<path>``."""
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def start(self, timeout_s: float = 10.0) -> None:
        """Start serving; raise RuntimeError if uvicorn is not up within ``timeout_s``."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake webhook server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        self._server.should_exit = True
        self._server.force_exit = True  # a hanging answer does not hold the test's end
        self._thread.join(timeout=10)
        self._sock.close()


@contextmanager
def running_webhook(fake: FakeWebhook | None = None) -> Iterator[FakeWebhookServer]:
    """Serve a receiver for the duration of the block."""
    server = FakeWebhookServer(fake)
    server.start()
    try:
        yield server
    finally:
        server.stop()
