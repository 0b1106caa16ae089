"""``/llmgate`` comment commands: strict parsing, the receiver's jobs, the reply and its limit."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from app.routes.issue_comment import Command, parse_command, quotable
from tests.unit.app_support import encode, fixture_json, post, queued_jobs, running_app, settings
from worker.gate import commands

REPO = {"owner": "Codertocat", "name": "Hello-World",
        "clone_url": "https://github.com/Codertocat/Hello-World.git"}


@pytest.mark.parametrize(("body", "expected"), [
    ("/llmgate rerun", Command("rerun")),
    ("  /llmgate rerun\r\nthe judge timed out", Command("rerun")),
    ("/llmgate rerun --no-cache", Command("rerun", no_cache=True)),
    ("/llmgate rerun --no-cache\nprovider changed", Command("rerun", no_cache=True)),
    ("/llmgate approve 1a2b3c4", Command("approve", sha="1a2b3c4")),
    ("/llmgate approve", Command("approve")),
    ("/llmgate help", Command("help")),
    ("/llmgate", Command("help")),
    ("/llmgate rerun please", Command("unknown", text="/llmgate rerun please")),
    ("/llmgate  rerun", Command("unknown", text="/llmgate  rerun")),
    ("/llmgate rerun --nocache", Command("unknown", text="/llmgate rerun --nocache")),
    ("/llmgate rerunx", Command("unknown", text="/llmgate rerunx")),
    ("/llmgate approve please", Command("unknown", text="/llmgate approve please")),
    ("/llmgate ping @org/team `x` <b>", Command("unknown", text="/llmgate ping org/team x b")),
    ("/llmgate\tstatus", Command("unknown", text="/llmgatestatus")),
    ("/llmgaterun", None),
    ("please /llmgate rerun", None),
    ("> /llmgate rerun", None),
    ("LGTM\n/llmgate rerun", None),
    ("/LLMGATE RERUN", None),
    ("", None),
])
def test_commands_are_parsed_strictly(body: str, expected: Command | None) -> None:
    assert parse_command(body) == expected


def test_quotable_keeps_only_safe_characters_and_60_of_them() -> None:
    assert quotable("/llmgate do `rm -rf` @here <img src=x> | é") == \
        "/llmgate do rm -rf here img srcx"
    assert len(quotable("/llmgate " + "x" * 200)) == 60


def _comment(body: str, **user: str) -> bytes:
    data = fixture_json("issue_comment.created.on-pull-request.DERIVED.json")
    data["comment"]["body"] = body
    data["comment"]["user"].update(user)
    return encode(data)


async def _deliver(redis_url: str, body: bytes) -> dict[str, Any]:
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, "issue_comment", "c-1", body)
    result: dict[str, Any] = answer.json()
    return result


async def test_rerun_without_cache_is_queued_with_the_flag(redis_url: str) -> None:
    assert await _deliver(redis_url, _comment("/llmgate rerun --no-cache")) == {
        "status": "queued"}
    [job] = await queued_jobs(redis_url)
    assert (job.function, job.job_id) == ("rerun_from_comment",
                                          "rerun:Codertocat/Hello-World:comment:492700400")
    assert job.args == ({"delivery_id": "c-1", "installation_id": 1, "repo": REPO,
                         "pr_number": 1, "comment_id": 492700400, "commenter": "Codertocat",
                         "no_cache": True},)


@pytest.mark.parametrize(("body", "kind", "text"), [
    ("/llmgate help", "help", ""),
    ("/llmgate rerun please", "unknown", "/llmgate rerun please"),
])
async def test_help_and_unknown_commands_queue_a_reply(redis_url: str, body: str, kind: str,
                                                       text: str) -> None:
    assert await _deliver(redis_url, _comment(body)) == {"status": "queued"}
    [job] = await queued_jobs(redis_url)
    assert (job.function, job.job_id) == ("reply_to_command",
                                          "command:Codertocat/Hello-World:comment:492700400")
    assert job.args == ({"delivery_id": "c-1", "installation_id": 1, "repo": REPO,
                         "pr_number": 1, "comment_id": 492700400, "commenter": "Codertocat",
                         "command": text, "kind": kind},)


@pytest.mark.parametrize("user", [{"type": "Bot", "login": "llmgate[bot]"},
                                  {"type": "User", "login": "renovate[bot]"}])
async def test_a_bot_gets_no_reply(redis_url: str, user: dict[str, str]) -> None:
    assert await _deliver(redis_url, _comment("/llmgate what", **user)) == {
        "status": "ignored", "reason": "comment is by a bot"}
    assert await queued_jobs(redis_url) == []


def test_reply_lists_every_command_and_quotes_the_unknown_one() -> None:
    body = commands.reply_body("unknown", "/llmgate rerun please")
    assert body.splitlines()[0] == ("llmgate did not understand `/llmgate rerun please`: the "
                                    "command must be the comment's first line, exactly as "
                                    "below.")
    for name in ("/llmgate rerun", "/llmgate rerun --no-cache", "/llmgate approve",
                 "/llmgate help"):
        assert f"- `{name}`: " in body
    assert parse_command(body) is None and "<!-- llmgate -->" not in body
    help_body = commands.reply_body("help", "")
    assert help_body.startswith("llmgate commands (the first line of a pull request comment):")


async def test_replies_are_limited_per_pull_request(redis_url: str) -> None:
    redis = Redis.from_url(redis_url)
    try:
        allowed = [await commands.allow_reply(redis, "o/r", 5) for _ in range(5)]
        other = await commands.allow_reply(redis, "o/r", 6)
        ttl = await redis.ttl(commands.reply_key("o/r", 5))
    finally:
        await redis.aclose()
    assert allowed == [True, True, True, False, False]
    assert other is True
    assert 3590 <= ttl <= 3600
