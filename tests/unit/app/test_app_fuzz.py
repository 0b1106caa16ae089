"""Thousands of random deliveries, signed and unsigned, never make /webhook answer 5xx.

The real app (``create_app``, its lifespan, a real redis-server) is driven in-process as a raw
ASGI app, with no HTTP client: 2,000 generated deliveries cost about 13 s of CPU, mostly
Hypothesis generating them. Each one mixes a body (a real acted-on event with fields replaced
or deleted, random JSON, random or deeply nested bytes), a signature (valid, missing, wrong,
duplicated, odd-case header name), random and non-ASCII header values, odd ``Content-Length``
values, a body split into chunks and sometimes a client that disconnects. The property: one
response, never 5xx, a JSON object as body, and anything not validly signed refused with 400,
401 or 413; and over the run every expected answer (200, 202, 400, 401, 413) was reached.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import MutableMapping
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette

from app.main import create_app
from app.webhooks import sign
from tests.budget import examples
from tests.unit.app_support import SECRET, fixture_bytes
from tests.unit.app_support import settings as web_settings

#: Examples per run: "thousands of generated bodies and headers" (issue 6), within ~30 s (in CI;
#: a fifth outside it, tests/budget.py).
MAX_EXAMPLES = examples(2000)
#: Fixtures of the events we act on, and the X-GitHub-Event each is sent with.
FIXTURES = {"pull_request.synchronize.json": "pull_request",
            "pull_request.opened.json": "pull_request",
            "pull_request.opened.from-fork.DERIVED.json": "pull_request",
            "issue_comment.created.on-pull-request.DERIVED.json": "issue_comment",
            "check_run.rerequested.json": "check_run",
            "ping.json": "ping"}
RAW = {name: fixture_bytes(name) for name in FIXTURES}
#: The fields the handlers read: a wrong value there must give 400, never 500.
PATHS = ["action", "installation", "installation.id", "repository", "repository.owner",
         "repository.owner.login", "repository.name", "repository.full_name",
         "repository.clone_url", "pull_request", "pull_request.number", "pull_request.head",
         "pull_request.head.sha", "pull_request.head.repo", "pull_request.head.repo.full_name",
         "pull_request.base.sha", "pull_request.base.ref", "pull_request.user",
         "pull_request.user.login", "issue", "issue.pull_request", "issue.number", "comment",
         "comment.body", "comment.id", "comment.user", "comment.user.type",
         "comment.user.login", "check_run", "check_run.id", "check_run.head_sha",
         "check_run.external_id", "requested_action", "requested_action.identifier",
         "sender", "sender.login"]
#: Answers the receiver may give; 503 would mean Redis failed, and Redis is up here.
ALLOWED = {200, 202, 400, 401, 413}
SIGNATURE = b"x-hub-signature-256"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8)
#: Values the handlers may find in a field: random JSON, commands, and near-valid strings.
field_values = json_values | st.sampled_from(
    ["/llmgate rerun", "/llmgate approve", "/llmgate approve 0000000", "approve", "requested",
     "synchronize", "opened", "created", "User", "Bot", "a" * 40, "pr:1", "", "\u0000",
     -1, 0, 2**63, 1e308])


@st.composite
def mutated_fixture(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A real acted-on delivery with 1-3 fields the handlers read replaced or deleted."""
    name = draw(st.sampled_from(sorted(FIXTURES)))
    data: Any = json.loads(RAW[name])
    for _ in range(draw(st.integers(1, 3))):
        *parents, last = draw(st.sampled_from(PATHS)).split(".")
        node = data
        for key in parents:
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        if draw(st.integers(0, 4)) == 0:
            node.pop(last, None)
        else:
            node[last] = draw(field_values)
    return FIXTURES[name].encode(), json.dumps(data).encode()


nested = st.integers(1, 5000).map(lambda n: b"[" * n + b"]" * n)
bodies = st.one_of(st.binary(max_size=300), json_values.map(lambda v: json.dumps(v).encode()),
                   nested, st.sampled_from([b"", b"{}", b"null", b'{"action": 1}', b"\xff\xfe{"]))
header_bytes = st.binary(max_size=40)
events = st.sampled_from([b"pull_request", b"issue_comment", b"check_run", b"ping", b"push", b""])
deliveries = st.one_of(mutated_fixture(), mutated_fixture(), mutated_fixture(),
                       st.tuples(events | header_bytes, bodies))
delivery_ids = st.one_of(st.uuids().map(lambda u: str(u).encode()), st.just(b"fixed-id"),
                         header_bytes, st.sampled_from([b"", b"caf\xe9", b"a" * 200]))
content_lengths = st.sampled_from(
    ["exact"] * 6 + [None, b"abc", b"-1", b"9" * 30, b"26214401", b"0", b" 1", "\u0663".encode()])
#: How X-Hub-Signature-256 is sent; only the first two are valid.
SIGNINGS = ["valid", "valid-then-wrong", "missing", "wrong-secret", "upper-hex", "sha1",
            "wrong-then-valid", "odd-case-name", "non-ascii"]
signings = st.sampled_from(SIGNINGS[:2] * 4 + SIGNINGS[2:])
extra_headers = st.lists(st.tuples(st.sampled_from([b"x-github-event", b"x-github-delivery",
                                                    b"content-type", b"x-random"]) | header_bytes,
                                   header_bytes), max_size=3)


def signature_headers(signing: str, body: bytes) -> list[tuple[bytes, bytes]]:
    """Return the signature header(s) for one way of signing ``body``."""
    valid = sign(SECRET, body).encode()
    wrong = sign("not-the-secret", body).encode()
    forms: dict[str, list[tuple[bytes, bytes]]] = {
        "valid": [(SIGNATURE, valid)],
        "valid-then-wrong": [(SIGNATURE, valid), (SIGNATURE, wrong)],
        "missing": [],
        "wrong-secret": [(SIGNATURE, wrong)],
        "upper-hex": [(SIGNATURE, b"sha256=" + valid[7:].upper())],
        "sha1": [(b"x-hub-signature", b"sha1=" + valid[7:47])],
        "wrong-then-valid": [(SIGNATURE, wrong), (SIGNATURE, valid)],
        "odd-case-name": [(b"X-Hub-Signature-256", valid)],
        "non-ascii": [(SIGNATURE, valid[:-2] + "\u00e9".encode())],
    }
    return forms[signing]


async def call(app: Starlette, headers: list[tuple[bytes, bytes]], chunks: list[bytes],
               disconnect: bool) -> tuple[int, bytes]:
    """Run one POST /webhook through ``app`` as raw ASGI; return (status, response body)."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/webhook", "raw_path": b"/webhook",
             "query_string": b"", "root_path": "", "headers": headers,
             "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8000)}
    inbox: list[dict[str, Any]] = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)]
    if disconnect:
        inbox[-1] = {"type": "http.disconnect"}
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return inbox.pop(0) if inbox else {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    starts = [m["status"] for m in sent if m["type"] == "http.response.start"]
    assert len(starts) == 1, sent
    return starts[0], b"".join(m.get("body", b"") for m in sent[1:])


@given(delivery=deliveries, delivery_id=delivery_ids, signing=signings,
       content_length=content_lengths, extra=extra_headers,
       cuts=st.lists(st.integers(0, 400), max_size=3),
       disconnect=st.sampled_from([False] * 9 + [True]))
@settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def _never_5xx(runner: asyncio.Runner, app: Starlette, seen: Counter[int],
               delivery: tuple[bytes, bytes], delivery_id: bytes, signing: str,
               content_length: str | bytes | None, extra: list[tuple[bytes, bytes]],
               cuts: list[int], disconnect: bool) -> None:
    event, body = delivery
    sent = [(b"x-github-event", event), (b"x-github-delivery", delivery_id),
            (b"content-type", b"application/json"), *signature_headers(signing, body), *extra]
    if content_length is not None:
        declared = b"%d" % len(body) if content_length == "exact" else content_length
        sent.append((b"content-length", declared))  # type: ignore[arg-type]
    bounds = sorted({min(cut, len(body)) for cut in cuts})
    chunks = [body[a:b] for a, b in zip([0, *bounds], [*bounds, len(body)], strict=True)]
    status, answer = runner.run(call(app, sent, chunks, disconnect))
    seen[status] += 1
    assert status in ALLOWED, (status, answer)
    assert isinstance(json.loads(answer), dict)
    if not signing.startswith("valid"):
        assert status in {400, 401, 413}, (signing, status, answer)


def test_webhook_never_answers_5xx_on_thousands_of_deliveries(redis_url: str) -> None:
    app = create_app(web_settings(redis_url))
    seen: Counter[int] = Counter()
    with asyncio.Runner() as runner:
        lifespan = app.router.lifespan_context(app)
        runner.run(lifespan.__aenter__())
        try:
            _never_5xx(runner, app, seen)
        finally:
            runner.run(lifespan.__aexit__(None, None, None))
    assert sum(seen.values()) >= MAX_EXAMPLES
    assert set(seen) == ALLOWED  # every kind of answer, queued jobs included, was reached
