"""GitHub's limits counted in UTF-8 bytes, and the App clock corrected by GitHub's (pure)."""

from __future__ import annotations

import logging
from email.utils import formatdate
from typing import Any

import pytest

from worker.github.auth import AppClock, is_clock_refusal
from worker.github.limits import (
    MAX_COMMENT_BYTES,
    MAX_OUTPUT_BYTES,
    fit_check_run,
    fit_comment,
    utf8_size,
)

CJK = "検証の質問"  # 3 bytes a character
EMOJI = "🚦"  # 4 bytes


def test_a_check_run_body_fits_in_bytes_and_keeps_what_it_does_not_cut() -> None:
    body: dict[str, Any] = {
        "name": "llmgate: " + EMOJI * 100, "status": "completed", "conclusion": "failure",
        "output": {"title": CJK * 100, "summary": CJK * 20000, "text": "ok",
                   "annotations": [{"path": "a", "start_line": 1, "end_line": 1,
                                    "annotation_level": "failure", "title": EMOJI * 100,
                                    "message": CJK * 30000}]}}
    out = fit_check_run(body)
    assert [utf8_size(out["name"]), utf8_size(out["output"]["title"]),
            utf8_size(out["output"]["summary"])] == [252, 255, MAX_OUTPUT_BYTES]
    # 65532 bytes of whole 3-byte characters, then the 3-byte ellipsis
    assert out["output"]["summary"] == (CJK * 4369)[:21844] + "…"
    assert out["output"]["text"] == "ok" and out["conclusion"] == "failure"
    [annotation] = out["output"]["annotations"]
    assert utf8_size(annotation["title"]) <= 255 and annotation["title"].endswith(EMOJI + "…")
    assert utf8_size(annotation["message"]) <= 64 * 1024
    assert body["output"]["summary"] == CJK * 20000  # the caller's body is left as it was


def test_a_comment_fits_in_bytes() -> None:
    assert fit_comment("short") == "short"
    assert utf8_size(fit_comment(EMOJI * 20000)) == MAX_COMMENT_BYTES == 65535


@pytest.mark.parametrize(("message", "about_time"), [
    ("'Issued at' claim ('iat') must be an Integer representing a time in the past", True),
    ("'Expiration time' claim ('exp') is too far in the future", True),
    ("A JSON web token could not be decoded", False),
    ("'Issuer' claim ('iss') must be an Integer", False),
    ("Bad credentials", False)])
def test_a_refusal_about_the_jwt_time_is_told_apart(message: str, about_time: bool) -> None:
    assert is_clock_refusal(message) is about_time


def test_the_clock_adopts_githubs_offset_and_logs_it_once(
        caplog: pytest.LogCaptureFixture) -> None:
    local = [1_800_000_300.0]  # 300 s ahead of GitHub's 1_800_000_000
    clock = AppClock(lambda: local[0])
    caplog.set_level(logging.WARNING, "worker.github.auth")
    assert clock.now() == 1_800_000_300
    assert not clock.correct(None) and not clock.correct("not a date")
    assert clock.correct(formatdate(1_800_000_000, usegmt=True))
    assert clock.now() == 1_800_000_000
    local[0] += 10
    assert clock.correct(formatdate(1_800_000_010, usegmt=True)) and clock.now() == 1_800_000_010
    assert [r.getMessage() for r in caplog.records] == [
        "GitHub refused an App JWT for its time: this machine's clock is 300 s ahead of "
        "GitHub's; JWTs are signed by GitHub's time from now on (fix the clock, e.g. with NTP)"]
