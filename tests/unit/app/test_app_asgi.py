"""The raw ASGI pieces of ``POST /webhook``: header lookup, body reading, JSON answers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from app.asgi import FastPathApp, encode_json, header_values, send_json
from app.main import create_app
from app.webhooks import Rejection, read_body
from tests.unit.app_support import fixture_bytes, headers, settings


def _receiver(*messages: dict[str, Any]) -> Any:
    """Return an ASGI ``receive`` that yields ``messages`` in order."""
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        return queue.pop(0)

    return receive


def test_header_values_keeps_the_first_of_repeated_headers_and_only_wanted_ones() -> None:
    scope = {"headers": [(b"x-github-event", b"ping"), (b"x-github-event", b"push"),
                         (b"authorization", b"token secret"), (b"x-hub-signature-256", b"\xe9")]}
    found = header_values(scope, {b"x-github-event", b"x-hub-signature-256", b"content-length"})
    assert found == {"x-github-event": "ping", "x-hub-signature-256": "\u00e9"}


async def test_send_json_sends_a_complete_json_response() -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await send_json(send, 202, {"status": "queued"})
    start, body = sent
    assert start == {"type": "http.response.start", "status": 202,
                     "headers": [(b"content-type", b"application/json"),
                                 (b"content-length", b"19")]}
    assert json.loads(body["body"]) == {"status": "queued"}
    assert body.get("more_body", False) is False


async def test_read_body_joins_chunks() -> None:
    receive = _receiver({"type": "http.request", "body": b'{"a":', "more_body": True},
                        {"type": "http.request", "body": b"1}", "more_body": False})
    assert await read_body(receive, None, 100) == b'{"a":1}'


@pytest.mark.parametrize("declared, messages, status, message", [
    ("12x", [], 400, "malformed Content-Length header"),
    ("101", [], 413, "body larger than 100 bytes"),
    (None, [{"type": "http.request", "body": b"x" * 60, "more_body": True},
            {"type": "http.request", "body": b"x" * 60, "more_body": False}],
     413, "body larger than 100 bytes"),
    ("10", [{"type": "http.request", "body": b"x" * 5, "more_body": True},
            {"type": "http.disconnect"}], 400, "client disconnected before the body was read"),
], ids=["malformed-length", "declared-too-large", "streamed-too-large", "disconnect"])
async def test_read_body_refusals(declared: str | None, messages: list[dict[str, Any]],
                                  status: int, message: str) -> None:
    with pytest.raises(Rejection) as refused:
        await read_body(_receiver(*messages), declared, 100)
    assert (refused.value.status_code, refused.value.message) == (status, message)


def test_encode_json_gives_the_same_compact_bytes_cached_or_not() -> None:
    first, again = encode_json({"status": "queued"}), encode_json({"status": "queued"})
    assert first == again == b'{"status":"queued"}'
    with_reason = {"status": "ignored", "reason": "caf\u00e9 \"quoted\""}
    assert encode_json(with_reason) == json.dumps(with_reason, separators=(",", ":")).encode()
    assert encode_json({"error": "x"}) == b'{"error":"x"}'


async def _answer(label: bytes, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": label})


def _fast_path_app() -> FastPathApp:
    async def fast(scope: Any, receive: Any, send: Any) -> None:
        await _answer(b"fast", send)

    class Routed:  # an instance: Starlette calls it as a raw ASGI app, as it does the receiver
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await _answer(b"routed " + scope["path"].encode(), send)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        yield

    return FastPathApp("/webhook", fast, routes=[Route("/webhook", Routed(), methods=["POST"])],
                       lifespan=lifespan)


@pytest.mark.parametrize("method, url, root_path, status, text", [
    ("POST", "/webhook", "", 200, "fast"),
    ("GET", "/webhook", "", 405, "Method Not Allowed"),
    ("POST", "/webhook/", "", 200, "fast"),  # Starlette redirects to /webhook (307)
    ("POST", "/gh/webhook", "/gh", 200, "routed /gh/webhook"),
    ("POST", "/other", "", 404, "Not Found"),
], ids=["fast", "wrong-method", "trailing-slash", "under-root-path", "unknown-path"])
async def test_fast_path_takes_only_a_plain_post_to_its_path(
        method: str, url: str, root_path: str, status: int, text: str) -> None:
    transport = httpx.ASGITransport(app=_fast_path_app(), root_path=root_path)
    async with httpx.AsyncClient(transport=transport, base_url="http://t",
                                 follow_redirects=True) as client:
        answer = await client.request(method, url, content=b"{}")
    assert (answer.status_code, answer.text) == (status, text)


async def test_a_delivery_under_a_root_path_is_queued_through_starlette(redis_url: str) -> None:
    app = create_app(settings(redis_url))
    body = fixture_bytes("pull_request.synchronize.json")
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, root_path="/gh")
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            answer = await client.post("/gh/webhook", content=body,
                                       headers=headers("pull_request", "root-1", body))
    assert (answer.status_code, answer.json()) == (202, {"status": "queued"})
