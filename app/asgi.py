"""The few raw ASGI helpers the ``POST /webhook`` hot path uses instead of Starlette's layers.

Starlette's ``Request``, ``request_response`` wrapper and ``JSONResponse`` cost about 25 us a
delivery on the benchmark machine (``bench/webhook_ack.py``), close to a tenth of the receiver's
whole budget; the webhook endpoint needs only a handful of headers, the body and a small JSON
answer (ASGI HTTP spec: asgi.readthedocs.io/en/latest/specs/www.html).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence

from starlette.applications import Starlette
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Lifespan, Receive, Scope, Send

_JSON_HEADERS = (b"content-type", b"application/json")
_STATUS_BODIES: dict[str, bytes] = {}
_MAX_CACHED = 32


def header_values(scope: Scope, names: Collection[bytes]) -> dict[str, str]:
    """Return the first value of each wanted header, keyed by lower-case name.

    Args:
        scope: an ASGI HTTP scope; its header names are lower-case bytes (ASGI spec).
        names: the wanted names, lower-case bytes, e.g. ``{b"x-github-event"}``.

    Values are decoded as latin-1, as Starlette does, so every byte string round-trips.
    """
    found: dict[str, str] = {}
    for name, value in scope["headers"]:
        if name in names:
            found.setdefault(name.decode("latin-1"), value.decode("latin-1"))
    return found


def encode_json(payload: dict[str, str]) -> bytes:
    """Return ``payload`` as compact JSON bytes; ``{"status": word}`` answers are encoded once.

    The status words are the receiver's own (``queued``, ``duplicate``, ...), so the cache
    stays small; it is capped at ``_MAX_CACHED`` entries anyway.
    """
    status = payload.get("status") if len(payload) == 1 else None
    if status is None:
        return json.dumps(payload, separators=(",", ":")).encode()
    body = _STATUS_BODIES.get(status)
    if body is None:
        body = json.dumps(payload, separators=(",", ":")).encode()
        if len(_STATUS_BODIES) < _MAX_CACHED:
            _STATUS_BODIES[status] = body
    return body


async def send_json(send: Send, status_code: int, payload: dict[str, str]) -> None:
    """Send a complete ``application/json`` response with ``payload`` as its body."""
    body = encode_json(payload)
    await send({"type": "http.response.start", "status": status_code,
                "headers": [_JSON_HEADERS, (b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


class FastPathApp(Starlette):
    """A Starlette app that hands ``POST <fast_path>`` straight to one raw ASGI endpoint.

    Starlette's middleware stack and router cost about 5 us a request on the benchmark
    machine (warm caches; more between sparse deliveries); the webhook endpoint needs
    neither. Everything else, and a ``POST`` under a ``root_path`` (a proxy prefix), goes
    through Starlette as usual, where ``routes`` should route ``fast_path`` to the same
    endpoint. An exception escaping the endpoint is answered 500 by the server (uvicorn), as
    Starlette would.

    Args:
        fast_path: the exact request path, e.g. ``"/webhook"``.
        fast_app: the raw ASGI endpoint for ``POST fast_path``.
        routes, lifespan: as for ``Starlette``.
    """

    def __init__(self, fast_path: str, fast_app: ASGIApp, routes: Sequence[BaseRoute],
                 lifespan: Lifespan[Starlette]) -> None:
        """Build the Starlette app and remember the fast path."""
        super().__init__(routes=routes, lifespan=lifespan)
        self._fast_path = fast_path
        self._fast_app = fast_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve ``POST fast_path`` directly, anything else through Starlette."""
        if (scope["type"] == "http" and scope["path"] == self._fast_path
                and scope["method"] == "POST" and not scope.get("root_path")):
            await self._fast_app(scope, receive, send)
            return
        await super().__call__(scope, receive, send)
