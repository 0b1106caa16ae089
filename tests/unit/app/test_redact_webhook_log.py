"""Refused deliveries cost little log and never show the payload (`app.rejections`)."""

from __future__ import annotations

import logging

import pytest

from app.rejections import RejectionLog
from tests.unit.app_support import SECRET, fixture_bytes, post, running_app, settings


class Clock:
    """A hand-driven monotonic clock, seconds."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_first_rejection_logged_then_counted_then_summarised(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    logger = logging.getLogger("llmgate.test.rejections")
    rejections = RejectionLog(logger, window_s=10.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="llmgate.test.rejections"):
        rejections.record(401, "missing or invalid X-Hub-Signature-256 (HMAC-SHA256)")
        for _ in range(999):
            clock.now += 0.005
            rejections.record(401, "missing or invalid X-Hub-Signature-256 (HMAC-SHA256)")
        rejections.record(413, "body larger than 26214400 bytes")
        clock.now += 10.0
        rejections.record(400, "x" * 500)
        rejections.flush()  # nothing counted since: no line
    assert [r.getMessage() for r in caplog.records] == [
        "webhook rejected (401): missing or invalid X-Hub-Signature-256 (HMAC-SHA256)",
        "webhook rejected 1000 more deliveries within 10 s: 401 x999 (missing or invalid "
        "X-Hub-Signature-256 (HMAC-SHA256)), 413 x1 (body larger than 26214400 bytes)",
        "webhook rejected (400): " + "x" * 120]


async def test_a_flood_of_unsigned_deliveries_writes_two_lines(
        redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    body = fixture_bytes("pull_request.synchronize.json")
    caplog.set_level(logging.INFO, logger="app")
    async with running_app(settings(redis_url)) as client:
        answers = [await post(client, "pull_request", f"flood-{i}", body, signed=False)
                   for i in range(300)]
    assert {a.status_code for a in answers} == {401}
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("app.")]
    assert lines == ["webhook rejected (401): missing or invalid X-Hub-Signature-256 "
                     "(HMAC-SHA256)"]
    assert len(caplog.text) < 200 + 300  # one line now; the other 299 wait for the summary
    for forbidden in (SECRET, "Codertocat", "flood-299"):
        assert forbidden not in caplog.text
