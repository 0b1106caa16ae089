"""The few raw ASGI helpers the ``POST /webhook`` hot path uses instead of Starlette's layers.

Starlette's ``Request``, ``request_response`` wrapper and ``JSONResponse`` cost about 25 us a
delivery on the benchmark machine (``bench/webhook_ack.py``), close to a tenth of the receiver's
whole budget; the webhook endpoint needs only a handful of headers, the body and a small JSON
answer (ASGI HTTP spec: asgi.readthedocs.io/en/latest/specs/www.html).
"""

from __future__ import annotations

import json
from collections.abc import Collection

from starlette.types import Scope, Send

_JSON_HEADERS = (b"content-type", b"application/json")


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


async def send_json(send: Send, status_code: int, payload: dict[str, str]) -> None:
    """Send a complete ``application/json`` response with ``payload`` as its body."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    await send({"type": "http.response.start", "status": status_code,
                "headers": [_JSON_HEADERS, (b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})
