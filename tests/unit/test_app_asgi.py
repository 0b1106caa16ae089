"""The raw ASGI pieces of ``POST /webhook``: header lookup, body reading, JSON answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.asgi import header_values, send_json
from app.webhooks import Rejection, read_body


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
