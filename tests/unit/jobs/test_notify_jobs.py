"""Notifications of default-branch regressions: the push job decides and enqueues, the delivery
job POSTs, retried.

Real parts throughout: the push job runs against real Redis and git with the fake GitHub for the
installation token (tests/unit/baseline_support.py); the deliveries run in a real arq worker
(burst mode, this process) and POST to a real HTTP receiver on 127.0.0.1
(tests/fakes/fake_webhook.py) that records what it got and answers as scripted.

The field repository: ``m9`` on main passes 90 of 100 examples; ``m10`` (after it) passes 60, a
regression under the suite's ``max_drop 0.05``; ``m11`` (after ``m10``) passes 62, no regression.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from arq import create_pool
from arq.worker import create_worker

import tests.unit.baseline_support as support
from tests.fakes.fake_webhook import FakeWebhook, FakeWebhookServer, running_webhook
from tests.unit.app_support import running_app, settings
from tests.unit.baseline_support import (
    BOT,
    DATASET,
    build_field_repo,
    commit,
    config,
    push_payload,
)
from tests.unit.worker_support import OWNER, REPO, git
from worker import history_contract as history
from worker.jobs.push import store_baseline
from worker.main import shutdown, startup, worker_settings
from worker.notify.deliver import JOB_DELIVER_NOTIFICATION

github = support.github  # fixture

SLACK_PATH = "services/T000/B000/xoxb-hook-path-0123456789"
HOOK_PATH = "hooks/llmgate-0123456789abcdef"
SIGNING_SECRET = "signing-secret-0123456789"
OPT_IN = "notify:\n  suites: all\n"
PUBLIC = "https://llmgate.example.test"


@pytest.fixture()
def receiver() -> Iterator[FakeWebhookServer]:
    """A fresh webhook receiver (200 unless a test scripts otherwise)."""
    with running_webhook(FakeWebhook()) as server:
        yield server


async def started(receiver: FakeWebhookServer, monkeypatch: pytest.MonkeyPatch,
                  ) -> AsyncIterator[dict[str, Any]]:
    """A started worker's context whose environment names both webhooks (backoff 0 s)."""
    monkeypatch.setenv("LLMGATE_NOTIFY_SLACK_URL", receiver.url(SLACK_PATH))
    monkeypatch.setenv("LLMGATE_NOTIFY_WEBHOOK_URL", receiver.url(HOOK_PATH))
    monkeypatch.setenv("LLMGATE_NOTIFY_WEBHOOK_SECRET", SIGNING_SECRET)
    monkeypatch.setenv("LLMGATE_NOTIFY_MAX_TRIES", "3")
    monkeypatch.setenv("LLMGATE_NOTIFY_BACKOFF_S", "0")
    context: dict[str, Any] = {}
    await startup(context)
    try:
        yield context
    finally:
        await shutdown(context)


@pytest.fixture()
async def ctx(github: Any, receiver: FakeWebhookServer,
              monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[dict[str, Any]]:
    """A started worker's context whose environment names both webhooks (backoff 0 s)."""
    async for context in started(receiver, monkeypatch):
        yield context


@pytest.fixture()
async def reporting_ctx(github: Any, receiver: FakeWebhookServer,
                        monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[dict[str, Any]]:
    """`ctx`, with reports stored too (``LLMGATE_PUBLIC_URL``, as test_push_report.py)."""
    monkeypatch.setenv("LLMGATE_PUBLIC_URL", PUBLIC + "/")
    async for context in started(receiver, monkeypatch):
        yield context


def field_repo(root: Path, conf: str) -> dict[str, str]:
    """The field repository with ``conf``, plus ``m10`` (60 of 100) and ``m11`` (62)."""
    shas = build_field_repo(root, conf)
    shas["m10"] = commit(root, "main", {"bot.py": BOT.format(passing=60)}, "m10")
    shas["m11"] = commit(root, "main", {"bot.py": BOT.format(passing=62)}, "m11")
    return shas


async def deliver_all() -> list[dict[str, str]]:
    """Run a burst worker until the queue is empty (later tries included); return the
    delivery jobs' results, ordered by job id (channel, then try)."""
    settings = worker_settings()
    pool = await create_pool(settings.redis_settings)
    try:
        worker = create_worker(settings, burst=True, poll_delay=0.05, handle_signals=False,
                               cron_jobs=[])
        await worker.async_run()
        await worker.close()
        done = [r for r in await pool.all_job_results() if r.function == JOB_DELIVER_NOTIFICATION]
        assert all(r.success for r in done)
        return [r.result for r in sorted(done, key=lambda r: r.job_id)]
    finally:
        await pool.aclose()


def bodies(server: FakeWebhookServer, path: str) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in server.fake.received if r.path == "/" + path]


async def test_a_regression_notifies_slack_and_the_json_webhook_once(ctx, receiver, tmp_path):
    repo = tmp_path / "repo"
    shas = field_repo(repo, config() + OPT_IN)
    first = await store_baseline(ctx, push_payload(str(repo), shas["m9"], 2000))
    assert first["notify"] == "first"  # nothing to compare with
    done = await store_baseline(ctx, push_payload(str(repo), shas["m10"], 3000))
    assert done["status"] == "stored"
    assert done["notify"] == "regressed: queued slack,webhook"
    again = await store_baseline(ctx, push_payload(str(repo), shas["m10"], 3000))
    assert again["notify"] == "same"  # a job run twice compares nothing twice
    results = await deliver_all()
    assert sorted(r["status"] for r in results) == ["delivered", "delivered"]
    [hook] = bodies(receiver, HOOK_PATH)
    assert hook == {
        "version": 1, "event": "regression", "repository": f"{OWNER}/{REPO}", "config": "",
        "branch": "main", "sha": shas["m10"], "short_sha": shas["m10"][:7],
        "commit_url": None, "previous_sha": shas["m9"], "previous_commit_url": None,
        "report_url": None, "reason": "",
        "rules": [{"suite": "score", "metric": "pass_rate", "group": "", "rule": "max_drop 0.05",
                   "previous": 0.9, "now": 0.6, "status": "fail",
                   "reason": "dropped 0.30 from base 0.90 (allowed 0.05)"}]}
    [slack] = bodies(receiver, SLACK_PATH)
    assert list(slack) == ["text"]
    text = slack["text"]
    assert text.startswith(f":rotating_light: *llmgate*: `{OWNER}/{REPO}@{shas['m10'][:7]}` "
                           f"on `main` regressed against the previous push `{shas['m9'][:7]}`")
    assert "• *score* `pass_rate` 0.9 → 0.6, rule `max_drop 0.05` fail" in text


async def test_a_regressions_notice_links_the_pushed_runs_stored_report(
        reporting_ctx, receiver, redis_url, tmp_path):
    """With reports on, the notice's ``report_url`` (JSON) and Slack's ``Report`` link are the
    report the push job stored for the regressing run, and the web app serves it."""
    repo = tmp_path / "repo"
    shas = field_repo(repo, config() + OPT_IN)
    await store_baseline(reporting_ctx, push_payload(str(repo), shas["m9"], 2000))
    done = await store_baseline(reporting_ctx, push_payload(str(repo), shas["m10"], 3000))
    assert done["notify"] == "regressed: queued slack,webhook"
    await deliver_all()
    run = await history.get_run(reporting_ctx["services"].redis, f"{OWNER}/{REPO}", shas["m10"])
    assert run is not None
    url = run["report_url"]
    assert url == f"{PUBLIC}/reports/{run['report_id']}"
    [hook] = bodies(receiver, HOOK_PATH)
    assert (hook["event"], hook["sha"], hook["report_url"]) == ("regression", shas["m10"], url)
    [slack] = bodies(receiver, SLACK_PATH)
    assert slack["text"].endswith(f"\n<{url}|Report>")
    async with running_app(settings(redis_url)) as web:
        page = await web.get(urlsplit(url).path)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert f"the push of {shas['m10'][:7]} to main: no base" in page.text  # m10's own report


async def test_the_json_body_is_signed_with_the_operators_secret(ctx, receiver, tmp_path):
    repo = tmp_path / "repo"
    shas = field_repo(repo, config() + OPT_IN)
    await store_baseline(ctx, push_payload(str(repo), shas["m9"], 2000))
    await store_baseline(ctx, push_payload(str(repo), shas["m10"], 3000))
    await deliver_all()
    [hook] = [r for r in receiver.fake.received if r.path == "/" + HOOK_PATH]
    expected = hmac.new(SIGNING_SECRET.encode(), hook.body, hashlib.sha256).hexdigest()
    assert hook.headers["x-llmgate-signature-256"] == f"sha256={expected}"
    assert hook.headers["x-llmgate-event"] == "regression"
    [slack] = [r for r in receiver.fake.received if r.path == "/" + SLACK_PATH]
    assert "x-llmgate-signature-256" not in slack.headers


async def test_without_opt_in_nothing_is_compared_or_sent(ctx, receiver, tmp_path):
    repo = tmp_path / "repo"
    shas = field_repo(repo, config())
    await store_baseline(ctx, push_payload(str(repo), shas["m9"], 2000))
    done = await store_baseline(ctx, push_payload(str(repo), shas["m10"], 3000))
    assert (done["status"], done["notify"]) == ("stored", "off")
    assert await deliver_all() == []
    assert receiver.fake.received == []


async def test_a_push_that_does_not_regress_sends_nothing(ctx, receiver, tmp_path):
    repo = tmp_path / "repo"
    shas = field_repo(repo, config() + OPT_IN)
    await store_baseline(ctx, push_payload(str(repo), shas["m10"], 3000))
    done = await store_baseline(ctx, push_payload(str(repo), shas["m11"], 4000))
    assert done["notify"] == "passed"  # 0.60 -> 0.62
    assert await deliver_all() == []
    assert receiver.fake.received == []


async def test_failed_deliveries_are_retried_honouring_retry_after(ctx, receiver, tmp_path):
    receiver.fake.answers = [(500, {}), (429, {"Retry-After": "1"})]  # then 200
    repo = tmp_path / "repo"
    shas = field_repo(repo, config() + OPT_IN)
    await store_baseline(ctx, push_payload(str(repo), shas["m9"], 2000))
    await store_baseline(ctx, push_payload(str(repo), shas["m10"], 3000))
    results = await deliver_all()
    assert sorted(r["status"] for r in results) == ["delivered", "delivered", "retrying",
                                                    "retrying"]
    got = receiver.fake.received
    assert len(got) == 4  # the 500, the 429 (either channel's), two deliveries
    throttled = got[1]  # answered 429 with Retry-After: 1
    retried = next(r for r in got[2:] if r.path == throttled.path)
    assert retried.at_monotonic - throttled.at_monotonic >= 1.0
    assert {r.path for r in got} == {"/" + SLACK_PATH, "/" + HOOK_PATH}


async def test_a_receiver_that_never_answers_2xx_neither_delays_nor_fails_the_push(
        ctx, receiver, tmp_path, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    # httpx's request line must be logged to show it redacted, whatever an earlier test in
    # this process did to the logger (a dictConfig disables the loggers it does not name)
    monkeypatch.setattr(logging.getLogger("httpx"), "disabled", False)
    caplog.set_level(logging.INFO, logger="httpx")
    receiver.fake.default = 503
    repo = tmp_path / "repo"
    shas = field_repo(repo, config() + OPT_IN)
    await store_baseline(ctx, push_payload(str(repo), shas["m9"], 2000))
    started = time.monotonic()
    done = await store_baseline(ctx, push_payload(str(repo), shas["m10"], 3000))
    assert done["status"] == "stored"
    assert done["notify"] == "regressed: queued slack,webhook"
    assert receiver.fake.received == []  # the push job only enqueued
    assert time.monotonic() - started < 30
    results = await deliver_all()
    assert [r["status"] for r in results] == ["retrying", "retrying", "given_up"] * 2
    assert {r["reason"] for r in results if "reason" in r} == {"3 tries failed: HTTP 503"}
    assert len(receiver.fake.received) == 6  # LLMGATE_NOTIFY_MAX_TRIES=3, per channel
    assert "given up: 3 tries failed, last: HTTP 503" in caplog.text
    assert 'HTTP Request: POST [redacted] "HTTP/1.1 503' in caplog.text  # httpx's own line
    for secret in (SLACK_PATH, HOOK_PATH, SIGNING_SECRET, receiver.url(HOOK_PATH)):
        assert secret not in caplog.text
    assert json.dumps(results).count("127.0.0.1") == 0


async def test_a_push_whose_previous_run_is_gone_is_reported_undecided(ctx, receiver,
                                                                       tmp_path):
    """Fail closed: the previous push's stored result expired, so the comparison cannot be
    made; that is told (``undecided``, with why), never skipped."""
    repo = tmp_path / "repo"
    shas = field_repo(repo, config() + OPT_IN)
    await store_baseline(ctx, push_payload(str(repo), shas["m9"], 2000))
    redis = ctx["services"].redis
    for key in [k async for k in redis.scan_iter(f"llmgate:baseline:{OWNER}/{REPO}:*")]:
        await redis.delete(key)
    done = await store_baseline(ctx, push_payload(str(repo), shas["m11"], 4000))
    assert done["notify"] == "undecided: queued slack,webhook"
    await deliver_all()
    [hook] = bodies(receiver, HOOK_PATH)
    assert (hook["event"], hook["rules"]) == ("undecided", [])
    assert hook["reason"] == (f"1 stored result(s) of the previous push {shas['m9'][:7]} are "
                              "gone or unreadable, so it cannot be compared")
    [slack] = bodies(receiver, SLACK_PATH)
    assert "could not be compared" in slack["text"]


async def test_a_folders_config_notifies_for_its_own_suites(ctx, receiver, tmp_path):
    """With several configs, each config's ``notify`` covers its suites, compared with that
    config's previous run (its own baseline namespace)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    folder = "services/a"
    files = {".llmgate.yml": "version: 1\nconfigs: [services/a, services/b]\n",
             f"{folder}/.llmgate.yml": config() + OPT_IN, f"{folder}/evals/score.jsonl": DATASET,
             "services/b/.llmgate.yml": config(), "services/b/evals/score.jsonl": DATASET,
             "services/b/bot.py": BOT.format(passing=90)}
    m9 = commit(repo, "main", {**files, f"{folder}/bot.py": BOT.format(passing=90)}, "m9")
    m10 = commit(repo, "main", {f"{folder}/bot.py": BOT.format(passing=60),
                                "services/b/bot.py": BOT.format(passing=10)}, "m10")
    await store_baseline(ctx, push_payload(str(repo), m9, 2000))
    done = await store_baseline(ctx, push_payload(str(repo), m10, 3000))
    assert done["configs"] == "services/a/.llmgate.yml=stored,services/b/.llmgate.yml=stored"
    await deliver_all()
    [hook] = bodies(receiver, HOOK_PATH)  # services/b regressed too, but did not opt in
    assert (hook["config"], hook["previous_sha"], hook["sha"]) == (folder, m9, m10)
    assert [(r["previous"], r["now"]) for r in hook["rules"]] == [(0.9, 0.6)]
    [slack] = bodies(receiver, SLACK_PATH)
    assert f"`{OWNER}/{REPO}/{folder}@{m10[:7]}`" in slack["text"]
