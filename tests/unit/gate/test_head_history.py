"""`worker.gate.head_history`: which head a comment was written for, on a real Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from worker.gate.head_history import MAX_HEADS, HeadAt, HeadHistory, bind_comment, github_time_s

A, B, C = "a" * 40, "b" * 40, "c" * 40
PR = ("acme/hello", 4)
T0 = github_time_s("2026-11-30T10:00:00Z")
assert T0 is not None


def _at(offset_s: int) -> str:
    """GitHub's time ``offset_s`` seconds after 2026-11-30T10:00:00Z."""
    minutes, seconds = divmod(offset_s, 60)
    return f"2026-11-30T{10 + minutes // 60:02d}:{minutes % 60:02d}:{seconds:02d}Z"


@pytest.fixture()
async def heads(redis_url: str) -> AsyncIterator[HeadHistory]:
    redis = Redis.from_url(redis_url)
    yield HeadHistory(redis)
    await redis.aclose()


async def _heads_at(heads: HeadHistory, *offsets_s: int) -> list[str]:
    return [(await heads.head_at(*PR, T0 + s)).head_sha or "?" for s in offsets_s]


@pytest.mark.parametrize(("text", "seconds"), [
    ("2026-11-30T10:00:00Z", 1796032800), ("1970-01-01T00:00:00Z", 0),
    ("2026-11-30T10:00:00+00:00", None), ("2026-13-30T10:00:00Z", None), ("", None),
    ("2026-11-30T10:00:00.5Z", None)])
def test_github_time(text: str, seconds: int | None) -> None:
    assert github_time_s(text) == seconds


async def test_a_comment_binds_to_the_head_pushed_before_it(heads: HeadHistory) -> None:
    assert await heads.record(*PR, A, _at(0)) == T0
    assert await heads.record(*PR, B, _at(60)) == T0 + 60
    # before any head; the same second as A's push; A; B's second; B
    assert await _heads_at(heads, -1, 0, 1, 59, 60, 61) == ["?", "?", A, A, "?", B]
    assert (await heads.head_at(*PR, T0)).unknown_why == (
        "a push in the same second cannot be ordered against it")
    assert (await heads.head_at(*PR, T0 - 1)).unknown_why == (
        "llmgate saw no push of this pull request before it")


async def test_later_deliveries_of_one_visit_keep_its_first_time(heads: HeadHistory) -> None:
    await heads.record(*PR, A, _at(10))
    assert await heads.record(*PR, A, _at(30)) == T0 + 10  # ready_for_review, edited
    assert await heads.record(*PR, A, _at(5)) == T0 + 5  # a late opened: earlier still
    assert await heads.record(*PR, A, "") is None  # no time: nothing recorded
    assert await _heads_at(heads, 6, 40) == [A, A]


async def test_a_head_that_comes_back_is_new_from_its_return(heads: HeadHistory) -> None:
    """Push A, push B, force-push A: a comment written while B was the head is B's."""
    await heads.record(*PR, A, _at(0))
    await heads.record(*PR, B, _at(60))
    assert await heads.record(*PR, A, _at(120)) == T0 + 120
    assert await _heads_at(heads, 30, 90, 150) == ["?", B, A]  # A's first visit is forgotten


async def test_out_of_order_deliveries_never_bind_to_a_head_not_current(
        heads: HeadHistory) -> None:
    """A's return (120) handled before B's push (60): the comment at 150 is refused, not
    bound to A, though A was the head then; nothing binds to A between 60 and 120."""
    await heads.record(*PR, A, _at(0))
    await heads.record(*PR, A, _at(120))
    await heads.record(*PR, B, _at(60))
    assert await _heads_at(heads, 30, 90, 150) == [A, B, B]


async def test_two_heads_of_one_second_cannot_be_ordered(heads: HeadHistory) -> None:
    await heads.record(*PR, A, _at(0))
    await heads.record(*PR, B, _at(5))
    await heads.record(*PR, C, _at(5))
    assert await _heads_at(heads, 3, 9) == [A, "?"]


async def test_the_record_keeps_the_newest_heads_and_expires(heads: HeadHistory,
                                                             redis_url: str) -> None:
    for n in range(MAX_HEADS + 2):
        await heads.record(*PR, f"{n:040x}", _at(2 * n))
    assert await _heads_at(heads, 3, 5, 2 * MAX_HEADS + 3) == ["?", f"{2:040x}",
                                                              f"{MAX_HEADS + 1:040x}"]
    redis = Redis.from_url(redis_url)
    try:
        assert 0 < await redis.ttl(HeadHistory.key(*PR)) <= 30 * 24 * 3600
    finally:
        await redis.aclose()


@pytest.mark.parametrize(("named", "seen", "approves"), [
    ("", HeadAt(B), True), (B[:7], HeadAt(B), True), (B, HeadAt(A), True),
    (B, HeadAt("", "why"), True),
    ("", HeadAt(A), False), (B[:7], HeadAt(A), False), ("", HeadAt("", "why"), False),
    (A[:7], HeadAt(B), False), (A, HeadAt(B), False)])
def test_bind_comment(named: str, seen: HeadAt, approves: bool) -> None:
    assert (bind_comment(named, B, seen) == "") is approves


def test_the_reply_names_the_commit_approved_and_the_way_to_approve_the_head() -> None:
    assert bind_comment("", B, HeadAt(A)) == (
        "`/llmgate approve` was written when the head was `aaaaaaa`, so it approves only that "
        "commit. The head is now `bbbbbbb`, pushed after the comment, and nothing ran: an "
        "approval covers the head its writer saw. To run `bbbbbbb`, review it and comment "
        f"`/llmgate approve` again, or `/llmgate approve {B}`.")
    assert bind_comment(A[:9], B, HeadAt(A)).startswith(
        "`/llmgate approve aaaaaaaaa` names a commit that is not this pull request's head "
        "`bbbbbbb`, so nothing ran.")
