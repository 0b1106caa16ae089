"""X-Hub-Signature-256: HMAC-SHA256 over the raw bytes, checked before anything is parsed."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from app.webhooks import sign, signature_matches
from tests.unit.app_support import (
    SECRET,
    SIGNATURES,
    WEBHOOKS,
    headers,
    queued_jobs,
    redis_keys,
    running_app,
    settings,
)

#: Odd spacing, an escaped non-ASCII character and keys out of order: re-serialising would
#: change these bytes, so only a signature over the raw body can match.
RAW_BODY = b'{"b": 1.0,  "a":"caf\\u00e9"}'


def test_github_documented_test_vector() -> None:
    vector = SIGNATURES["github_docs_test_vector"]
    assert vector["secret"] == "It's a Secret to Everybody"
    assert sign("It's a Secret to Everybody", b"Hello, World!") == (
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")


@pytest.mark.parametrize("entry", [e for e in SIGNATURES["files"]
                                   if (WEBHOOKS / e["file"].split("/")[-1]).exists()],
                         ids=lambda e: e["file"].split("/")[-1])
def test_sign_matches_the_octokit_signatures_of_every_fixture(entry: dict[str, str]) -> None:
    body = (WEBHOOKS / entry["file"].split("/")[-1]).read_bytes()
    assert sign(SECRET, body) == entry["x_hub_signature_256"]
    assert signature_matches(SECRET, body, entry["x_hub_signature_256"])


@pytest.mark.parametrize("header", [
    None, "", "sha256=", "sha1=" + hmac.new(SECRET.encode(), RAW_BODY, hashlib.sha1).hexdigest(),
    sign(SECRET, RAW_BODY).upper(), sign(SECRET, RAW_BODY) + " ", "sha256=\u00ff" * 3])
def test_malformed_headers_do_not_match(header: str | None) -> None:
    assert not signature_matches(SECRET, RAW_BODY, header)


async def test_raw_bytes_signed_correctly_are_accepted(redis_url: str) -> None:
    async with running_app(settings(redis_url)) as client:
        answer = await client.post("/webhook", content=RAW_BODY,
                                   headers=headers("ping", "raw-1", RAW_BODY))
    assert answer.status_code == 200
    assert answer.json() == {"status": "pong"}


def _flipped(body: bytes) -> bytes:
    return body[:5] + bytes([body[5] ^ 0x01]) + body[6:]


def _legacy_only(body: bytes) -> dict[str, str]:
    sent = headers("pull_request", "legacy-1")
    sent["X-Hub-Signature"] = "sha1=" + hmac.new(SECRET.encode(), body, hashlib.sha1).hexdigest()
    return sent


SYNC = (WEBHOOKS / "pull_request.synchronize.json").read_bytes()


@pytest.mark.parametrize("body, sent", [
    (_flipped(SYNC), headers("pull_request", "flip-1", SYNC)),
    (SYNC, headers("pull_request", "none-1")),
    (SYNC, _legacy_only(SYNC)),
    (SYNC, headers("pull_request", "other-1", SYNC, secret="another-secret")),
    (_flipped(RAW_BODY), headers("ping", "flip-2", RAW_BODY)),
], ids=["one-byte-flipped", "no-signature", "legacy-sha1-only", "other-secret", "raw-flipped"])
async def test_bad_signatures_get_401_and_queue_nothing(
        redis_url: str, body: bytes, sent: dict[str, str]) -> None:
    async with running_app(settings(redis_url)) as client:
        answer = await client.post("/webhook", content=body, headers=sent)
    assert answer.status_code == 401
    assert await queued_jobs(redis_url) == []
    assert redis_keys(redis_url) == []  # not even a delivery mark
