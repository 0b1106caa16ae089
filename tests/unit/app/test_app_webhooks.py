"""POST /webhook through the real router into a real arq queue on a real redis-server."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis

from app.spool import DeliverySpool
from app.webhooks import sign
from tests.conftest import free_port
from tests.e2e.chaos_processes import RedisOptions, RedisProcess
from tests.unit.app_support import (
    BASE_SHA,
    HEAD_SHA,
    SECRET,
    encode,
    fixture_bytes,
    fixture_json,
    headers,
    post,
    queued_jobs,
    redis_keys,
    running_app,
    settings,
)

REPO = {"owner": "Codertocat", "name": "Hello-World",
        "clone_url": "https://github.com/Codertocat/Hello-World.git"}
GATE_JOB_ID = f"gate:Codertocat/Hello-World#2@{HEAD_SHA}"

FIXTURE_OUTCOMES = [
    ("check_run.rerequested.json", "check_run", 200, "ignored", 0),
    ("check_suite.rerequested.json", "check_suite", 202, "queued", 1),  # App id: worker's
    ("issue_comment.created.json", "issue_comment", 200, "ignored", 0),
    ("issue_comment.created.on-pull-request.DERIVED.json", "issue_comment", 202, "queued", 1),
    ("issue_comment.edited.json", "issue_comment", 200, "ignored", 0),
    ("ping.json", "ping", 200, "pong", 0),
    ("pull_request.closed.json", "pull_request", 200, "recorded", 0),  # cancels its runs
    ("pull_request.edited.DERIVED.json", "pull_request", 200, "ignored", 0),
    ("pull_request.opened.from-fork.DERIVED.json", "pull_request", 202, "queued", 1),
    ("pull_request.opened.json", "pull_request", 202, "queued", 1),
    ("pull_request.ready_for_review.json", "pull_request", 202, "queued", 1),
    ("pull_request.reopened.json", "pull_request", 202, "queued", 1),
    ("pull_request.synchronize.json", "pull_request", 202, "queued", 1),
    ("push.json", "push", 202, "queued", 1),  # to the default branch: stores a baseline
]


@pytest.mark.parametrize("name, event, code, status, jobs", FIXTURE_OUTCOMES,
                         ids=[row[0] for row in FIXTURE_OUTCOMES])
async def test_each_fixture_is_routed(redis_url: str, name: str, event: str, code: int,
                                      status: str, jobs: int) -> None:
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, event, "fixture-1", fixture_bytes(name))
    assert (answer.status_code, answer.json()["status"]) == (code, status)
    assert len(await queued_jobs(redis_url)) == jobs
    assert "llmgate:delivery:fixture-1" in redis_keys(redis_url)


async def test_synchronize_enqueues_the_gate_job_with_exact_payload(redis_url: str) -> None:
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, "pull_request", "sync-1",
                            fixture_bytes("pull_request.synchronize.json"))
    assert answer.status_code == 202
    [job] = await queued_jobs(redis_url)
    assert (job.function, job.job_id, job.kwargs) == ("gate_pull_request", GATE_JOB_ID, {})
    assert job.args == ({"delivery_id": "sync-1", "installation_id": 1, "repo": REPO,
                         "pr_number": 2, "head_sha": HEAD_SHA, "base_sha": BASE_SHA,
                         "base_ref": "master", "head_repo": "Codertocat/Hello-World",
                         "author": "Codertocat", "draft": False,
                         "updated_at": "2019-05-15T15:20:33Z"},)


async def test_same_delivery_twice_makes_one_job(redis_url: str) -> None:
    body = fixture_bytes("pull_request.synchronize.json")
    async with running_app(settings(redis_url)) as client:
        first = await post(client, "pull_request", "redelivered-1", body)
        second = await post(client, "pull_request", "redelivered-1", body)
    assert (first.status_code, first.json()) == (202, {"status": "queued"})
    assert (second.status_code, second.json()) == (200, {"status": "duplicate"})
    assert len(await queued_jobs(redis_url)) == 1


async def test_same_body_new_delivery_id_is_a_duplicate_and_makes_one_job(
        redis_url: str) -> None:
    """A captured signed body replayed under a fresh X-GitHub-Delivery queues nothing."""
    body = fixture_bytes("pull_request.synchronize.json")
    async with running_app(settings(redis_url)) as client:
        first = await post(client, "pull_request", "orig-1", body)
        [job] = await queued_jobs(redis_url)
        _drop_arq_keys(redis_url)  # the run is over and its result expired
        replay = await post(client, "pull_request", "replay-1", body)
        assert await queued_jobs(redis_url) == []
        data = fixture_json("pull_request.synchronize.json")
        data["pull_request"]["head"]["sha"] = "d" * 40  # a real new push: a distinct body
        pushed = await post(client, "pull_request", "push-2", encode(data))
    assert (first.status_code, first.json()) == (202, {"status": "queued"})
    assert (replay.status_code, replay.json()) == (200, {"status": "duplicate"})
    assert (pushed.status_code, pushed.json()) == (202, {"status": "queued"})
    assert job.job_id == GATE_JOB_ID
    assert [j.job_id for j in await queued_jobs(redis_url)] == [GATE_JOB_ID.replace(HEAD_SHA,
                                                                                    "d" * 40)]
    assert "llmgate:delivery:replay-1" not in redis_keys(redis_url)


def _drop_arq_keys(redis_url: str) -> None:
    """Delete arq's job, result and queue keys, keeping the receiver's marks."""
    client = redis.Redis.from_url(redis_url)
    try:
        for key in client.keys("arq:*"):  # type: ignore[union-attr]
            client.delete(key)
    finally:
        client.close()


def _distinct(name: str, i: int) -> bytes:
    """Return fixture ``name`` made distinct as GitHub's own deliveries are (a timestamp)."""
    data = fixture_json(name)
    data["pull_request"]["updated_at"] = f"2019-05-15T15:20:{i:02d}Z"
    return encode(data)


async def test_racing_deliveries_for_one_head_sha_make_one_job(redis_url: str) -> None:
    names = ["pull_request.opened.json", "pull_request.synchronize.json",  # (a reopen gets a
             "pull_request.synchronize.json",  # job of its own: tests/unit/app/test_runs_web.py)
             "pull_request.opened.from-fork.DERIVED.json"] * 3
    async with running_app(settings(redis_url)) as client:
        answers = await asyncio.gather(*(
            post(client, "pull_request", f"race-{i}", _distinct(name, i))
            for i, name in enumerate(names)))
    assert all(a.status_code in (200, 202) for a in answers)
    assert sorted(a.json()["status"] for a in answers) == ["already_queued"] * 11 + ["queued"]
    assert [job.job_id for job in await queued_jobs(redis_url)] == [GATE_JOB_ID]


def _comment(body: str, *, action: str = "created", user_type: str = "User",
             login: str = "Codertocat", on_pr: bool = True) -> bytes:
    data = fixture_json("issue_comment.created.on-pull-request.DERIVED.json")
    data["action"] = action
    data["comment"]["body"] = body
    data["comment"]["user"].update(type=user_type, login=login)
    if not on_pr:
        del data["issue"]["pull_request"]
    return encode(data)


@pytest.mark.parametrize("body, reason", [
    (_comment("Eval gate failed. comment `/llmgate rerun` to retry", user_type="Bot",
              login="llmgate[bot]"), "comment is not an /llmgate command"),
    (_comment("/llmgate rerun", user_type="Bot", login="llmgate[bot]"), "comment is by a bot"),
    (_comment("/llmgate rerun", login="renovate[bot]"), "comment is by a bot"),
    (_comment("/llmgate rerun", on_pr=False), "comment is on an issue, not a pull request"),
    (_comment("/llmgate rerun", action="edited"), "no handler for this event and action"),
    (_comment("/llmgaterun"), "comment is not an /llmgate command"),
], ids=["bot-mentions-command", "bot-type", "bot-login", "plain-issue", "edited", "no-word"])
async def test_comments_that_must_not_trigger(redis_url: str, body: bytes, reason: str) -> None:
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, "issue_comment", "comment-1", body)
    assert (answer.status_code, answer.json()) == (200, {"status": "ignored", "reason": reason})
    assert await queued_jobs(redis_url) == []


async def test_human_rerun_comment_enqueues_exactly_once(redis_url: str) -> None:
    body = _comment("/llmgate rerun\nthe judge timed out")
    async with running_app(settings(redis_url)) as client:
        first = await post(client, "issue_comment", "rerun-1", body)
        replay = await post(client, "issue_comment", "rerun-2", body)  # same body, new id
        data = json.loads(body)
        data["comment"]["updated_at"] = "2019-05-15T15:21:00Z"
        again = await post(client, "issue_comment", "rerun-3", encode(data))  # same comment
    assert [first.json()["status"], replay.json()["status"], again.json()["status"]] == [
        "queued", "duplicate", "already_queued"]
    [job] = await queued_jobs(redis_url)
    assert (job.function, job.job_id) == (
        "rerun_from_comment", "rerun:Codertocat/Hello-World:comment:492700400")
    assert job.args == ({"delivery_id": "rerun-1", "installation_id": 1, "repo": REPO,
                         "pr_number": 1, "comment_id": 492700400, "commenter": "Codertocat"},)


async def test_acted_on_event_without_installation_is_ignored_with_reason(
        redis_url: str) -> None:
    data = fixture_json("pull_request.synchronize.json")
    del data["installation"]
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, "pull_request", "no-install-1", encode(data))
    assert answer.status_code == 200
    assert answer.json() == {"status": "ignored",
                             "reason": "payload has no installation.id, so the App cannot "
                                       "authenticate"}
    assert await queued_jobs(redis_url) == []


def _broken(name: str, path: str, value: Any) -> bytes:
    data = fixture_json(name)
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[key]
    node[last] = value
    return encode(data)


@pytest.mark.parametrize("event, body, field", [
    ("pull_request", _broken("pull_request.synchronize.json", "pull_request.head.sha", 123),
     "pull_request.head.sha"),
    ("pull_request", _broken("pull_request.synchronize.json", "pull_request.head.sha",
                             "--upload-pack=touch /tmp/pwned"), "pull_request.head.sha"),
    ("pull_request", _broken("pull_request.synchronize.json", "pull_request", "x"),
     "pull_request.number"),
    ("pull_request", _broken("pull_request.synchronize.json", "pull_request.number", True),
     "pull_request.number"),
    ("pull_request", _broken("pull_request.synchronize.json", "installation.id", "1"),
     "installation.id"),
    ("pull_request", _broken("pull_request.synchronize.json", "repository.clone_url",
                             "ext::sh -c touch% /tmp/pwned"), "repository.clone_url"),
    ("issue_comment", _broken("issue_comment.created.on-pull-request.DERIVED.json", "issue", []),
     "issue"),
    ("issue_comment", _broken("issue_comment.created.on-pull-request.DERIVED.json",
                              "comment.body", None), "comment.body"),
    ("issue_comment", _broken("issue_comment.created.on-pull-request.DERIVED.json",
                              "comment.user", {"id": 1}), "comment.user.type"),
], ids=lambda value: value if isinstance(value, str) and len(value) < 40 else "")
async def test_malformed_fields_on_acted_events_get_400_and_no_mark(
        redis_url: str, event: str, body: bytes, field: str) -> None:
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, event, "broken-1", body)
    assert answer.status_code == 400
    assert answer.json()["error"].startswith(f"delivery broken-1: payload field {field} ")
    assert redis_keys(redis_url) == []  # a fixed redelivery is not taken for a duplicate


async def test_oversized_body_is_refused_by_content_length(redis_url: str) -> None:
    body = encode({"padding": "x" * 2048})
    async with running_app(settings(redis_url, max_body_bytes=1024)) as client:
        answer = await post(client, "ping", "big-1", body)
    assert (answer.status_code, answer.json()) == (413, {"error": "body larger than 1024 bytes"})
    assert redis_keys(redis_url) == []


async def test_oversized_streamed_body_is_refused_before_it_is_all_read(redis_url: str) -> None:
    pulled = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal pulled
        for _ in range(100):
            pulled += 1
            yield b" " * 512

    async with running_app(settings(redis_url, max_body_bytes=4096)) as client:
        answer = await client.post("/webhook", content=chunks(),
                                   headers=headers("ping", "stream-1"))
    assert answer.status_code == 413
    assert pulled <= 10


@pytest.mark.parametrize("body, sent_headers, message", [
    (b"{not json", headers("ping", "bad-1"), "body is not valid JSON"),
    (b"[1, 2]", headers("ping", "bad-2"), "body is not a JSON object"),
    (b"[" * 100_000, headers("ping", "bad-3"), "body is not valid JSON"),
    (b'{"zen": "x"}', {"X-GitHub-Delivery": "bad-4"}, "missing or malformed X-GitHub-Event"),
    (b'{"zen": "x"}', {"X-GitHub-Event": "ping"}, "missing or malformed X-GitHub-Delivery"),
    (b'{"zen": "x"}', headers("ping", "bad id"), "missing or malformed X-GitHub-Delivery"),
    (b'{"action": ["opened"]}', headers("pull_request", "bad-7"), "delivery bad-7: payload"),
], ids=["not-json", "not-object", "deep-nesting", "no-event", "no-delivery", "bad-delivery",
        "action-not-string"])
async def test_bad_requests_get_400(redis_url: str, body: bytes, sent_headers: dict[str, str],
                                    message: str) -> None:
    signed = sent_headers | {"X-Hub-Signature-256": sign(SECRET, body)}
    async with running_app(settings(redis_url)) as client:
        answer = await client.post("/webhook", content=body, headers=signed)
    assert answer.status_code == 400
    assert answer.json()["error"].startswith(message)
    assert redis_keys(redis_url) == []


async def test_healthz_is_ok_with_redis(redis_url: str) -> None:
    async with running_app(settings(redis_url)) as client:
        answer = await client.get("/healthz")
    assert (answer.status_code, answer.json()) == (200, {"status": "ok"})


async def test_unreachable_redis_gives_503_on_healthz_and_keeps_deliveries(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A delivery while Redis is away is kept (202 spooled) and queued once Redis answers;
    a redelivery of it meanwhile is a duplicate then, and nothing is queued twice."""
    server = RedisProcess(tmp_path, "redis", RedisOptions())
    body = fixture_bytes("pull_request.synchronize.json")
    async with running_app(settings(server.url)) as client:
        health = await client.get("/healthz")
        delivery = await post(client, "pull_request", "down-1", body)
        again = await post(client, "pull_request", "down-1", body)
        server.start()  # Redis comes up on the address the app was given
        try:
            for _ in range(100):
                if await queued_jobs(server.url):
                    break
                await asyncio.sleep(0.05)
            jobs = await queued_jobs(server.url)
        finally:
            server.stop()
    assert health.status_code == 503
    assert (delivery.status_code, delivery.json()) == (202, {"status": "spooled"})
    assert again.status_code == 202
    assert [job.function for job in jobs] == ["gate_pull_request"]
    assert "2 kept deliveries enqueued" in caplog.text


async def test_a_full_redis_keeps_deliveries_and_readyz_says_why(tmp_path: Path) -> None:
    """Issue 32: a Redis at its ``maxmemory`` (``noeviction``) refuses the enqueue with ``OOM``;
    the delivery is kept (202 spooled, not a 503 GitHub never redelivers), ``/readyz`` and
    ``/metrics`` say Redis refuses writes, and the job is queued once memory is freed."""
    server = RedisProcess(tmp_path, "redis", RedisOptions())
    server.start()
    admin = server.client()
    body = fixture_bytes("pull_request.synchronize.json")
    try:
        async with running_app(settings(server.url)) as client:
            admin.config_set("maxmemory", "1")  # full: every write that may grow is refused
            delivery = await post(client, "pull_request", "full-1", body)
            ready = await client.get("/readyz")
            metrics = (await client.get("/metrics")).text
            admin.config_set("maxmemory", "0")  # memory freed
            for _ in range(100):
                if await queued_jobs(server.url):
                    break
                await asyncio.sleep(0.05)
            jobs = await queued_jobs(server.url)
            after = (await client.get("/metrics")).text
    finally:
        admin.close()
        server.stop()
    assert (delivery.status_code, delivery.json()) == (202, {"status": "spooled"})
    assert ready.status_code == 503
    assert ready.json()["reason"].startswith("redis refuses writes (out of memory)")
    assert "llmgate_redis_writes_refused 1.0" in metrics.splitlines()
    assert "llmgate_redis_writes_refused 0.0" in after.splitlines()
    assert [job.function for job in jobs] == ["gate_pull_request"]


async def test_a_full_spool_answers_503_and_a_stop_names_what_it_kept(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr("app.webhooks.DeliverySpool", lambda: DeliverySpool(capacity=1))
    unreachable = f"redis://127.0.0.1:{free_port()}/0"
    body = fixture_bytes("pull_request.synchronize.json")
    async with running_app(settings(unreachable)) as client:
        kept = await post(client, "pull_request", "full-1", body)
        refused = await post(client, "pull_request", "full-2", body)
    assert (kept.status_code, refused.status_code) == (202, 503)
    assert ("stopping with 1 deliveries Redis never took; redeliver them from the App's "
            "advanced settings: full-1") in caplog.text


async def test_failed_enqueue_unmarks_the_delivery_so_redelivery_works(
        redis_url: str, redis_server: str) -> None:
    """A Redis user that may mark deliveries but not touch arq's keys makes the enqueue fail."""
    admin = redis.Redis.from_url(redis_server)
    admin.acl_setuser("webonly", enabled=True, passwords=["+pw"], keys=["llmgate:*"],
                      commands=["+@all"], reset=True)
    limited = redis_url.replace("redis://", "redis://webonly:pw@")
    body = fixture_bytes("pull_request.synchronize.json")
    try:
        async with running_app(settings(limited)) as client:
            refused = await post(client, "pull_request", "retry-1", body)
        assert refused.status_code == 503
        assert redis_keys(redis_url) == []
        async with running_app(settings(redis_url)) as client:
            redelivered = await post(client, "pull_request", "retry-1", body)
        assert (redelivered.status_code, redelivered.json()) == (202, {"status": "queued"})
    finally:
        admin.acl_deluser("webonly")
        admin.close()


async def test_one_log_line_per_delivery_without_payload_or_secret(
        redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    body = fixture_bytes("pull_request.synchronize.json")
    caplog.set_level(logging.INFO, logger="app")
    async with running_app(settings(redis_url)) as client:
        await post(client, "pull_request", "log-1", body)
        await post(client, "pull_request", "log-2", body, signed=False)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("app.")]
    assert lines == [
        "delivery log-1 event=pull_request action=synchronize: queued",
        "webhook rejected (401): missing or invalid X-Hub-Signature-256 (HMAC-SHA256)"]
    for forbidden in (SECRET, sign(SECRET, body)[7:], "Codertocat"):
        assert forbidden not in caplog.text
