"""Random bodies and headers, signed and unsigned, never make /webhook answer 5xx."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from app.main import create_app
from app.webhooks import sign
from tests.unit.app_support import SECRET, fixture_bytes
from tests.unit.app_support import settings as web_settings

#: Fixtures of the events we act on, and the X-GitHub-Event each is sent with.
FIXTURES = {"pull_request.synchronize.json": "pull_request",
            "pull_request.opened.json": "pull_request",
            "issue_comment.created.on-pull-request.DERIVED.json": "issue_comment",
            "ping.json": "ping"}
RAW = {name: fixture_bytes(name) for name in FIXTURES}
#: The fields the handlers read: a wrong value there must give 400, never 500.
PATHS = ["action", "installation", "installation.id", "repository", "repository.owner",
         "repository.owner.login", "repository.name", "repository.clone_url", "pull_request",
         "pull_request.number", "pull_request.head", "pull_request.head.sha",
         "pull_request.base.sha", "pull_request.base.ref", "issue", "issue.pull_request",
         "issue.number", "comment", "comment.body", "comment.id", "comment.user",
         "comment.user.type", "comment.user.login"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8)


@st.composite
def mutated_fixture(draw: st.DrawFn) -> tuple[str, bytes]:
    """A real delivery with one field the handlers read replaced by a random value."""
    name = draw(st.sampled_from(sorted(FIXTURES)))
    data: Any = json.loads(RAW[name])
    *parents, last = draw(st.sampled_from(PATHS)).split(".")
    node = data
    for key in parents:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node[last] = draw(json_values | st.just("/llmgate rerun"))
    return FIXTURES[name], json.dumps(data).encode()


header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=40)
events = st.sampled_from(["pull_request", "issue_comment", "ping", "push", ""]) | header_text
bodies = st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode())
deliveries = st.one_of(mutated_fixture(), mutated_fixture(), st.tuples(events, bodies))
delivery_ids = st.one_of(st.uuids().map(str), st.uuids().map(str), header_text)
content_lengths = st.sampled_from([None] * 6 + ["abc", "-1", "99999999999", "0"])


@given(delivery=deliveries, delivery_id=delivery_ids, signed=st.sampled_from([True] * 3 + [False]),
       content_length=content_lengths)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def _never_5xx(client: TestClient, delivery: tuple[str, bytes], delivery_id: str, signed: bool,
               content_length: str | None) -> None:
    event, body = delivery
    sent = {b"X-GitHub-Event": event.encode("latin-1"),
            b"X-GitHub-Delivery": delivery_id.encode("latin-1")}
    if signed:
        sent[b"X-Hub-Signature-256"] = sign(SECRET, body).encode()
    if content_length is not None:
        sent[b"Content-Length"] = content_length.encode()
    answer = client.post("/webhook", content=body, headers=sent)
    assert answer.status_code < 500, answer.text


def test_webhook_never_answers_5xx(redis_url: str) -> None:
    with TestClient(create_app(web_settings(redis_url))) as client:
        _never_5xx(client)
