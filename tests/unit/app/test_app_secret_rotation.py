"""Rotating the webhook secret: the previous one is accepted too, compared alike, never shown.

Field case: an operator changed the App's webhook secret and restarted the web process with the
new one; deliveries GitHub had signed with the old secret (in flight, and the manual
redeliveries of the failed ones) were refused 401 and their pull requests never got a check.
The deliveries go through the real web app (ASGI, real Redis, real arq queue).
"""

from __future__ import annotations

import hmac
import logging

import pytest

import app.webhooks
from app.settings import SettingsError, WebSettings
from app.webhooks import sign
from tests.unit.app_support import (
    SECRET,
    encode,
    fixture_bytes,
    fixture_json,
    headers,
    queued_jobs,
    running_app,
    set_fields,
    settings,
)

OLD = "old-webhook-secret-7f3a9c"
OTHER = "never-this-one-1b2c3d"
PING = fixture_bytes("ping.json")
SYNC = fixture_bytes("pull_request.synchronize.json")
#: Another pull request's delivery (the same body again would be a replay: 200 duplicate).
OTHER_PR = encode(set_fields(fixture_json("pull_request.synchronize.json"),
                             {"number": 3, "pull_request__number": 3}))


async def _deliver(client, body: bytes, delivery_id: str, secret: str) -> int:
    answer = await client.post("/webhook", content=body,
                               headers=headers("pull_request", delivery_id, body, secret))
    return answer.status_code


async def test_during_a_rotation_both_secrets_are_accepted_and_no_other(redis_url, caplog):
    caplog.set_level(logging.DEBUG)
    rotating = settings(redis_url, previous_webhook_secret=OLD)
    async with running_app(rotating) as client:
        assert await _deliver(client, SYNC, "new-1", SECRET) == 202
        assert await _deliver(client, OTHER_PR, "old-1", OLD) == 202
        assert await _deliver(client, SYNC, "other-1", OTHER) == 401
    assert len(await queued_jobs(redis_url)) == 2
    assert "delivery old-1 is signed with GITHUB_WEBHOOK_SECRET_PREVIOUS" in caplog.text
    assert "GITHUB_WEBHOOK_SECRET_PREVIOUS is set" in caplog.text  # the start-up warning
    assert SECRET not in caplog.text and OLD not in caplog.text


async def test_without_the_previous_secret_an_old_signature_is_refused(redis_url):
    async with running_app(settings(redis_url)) as client:
        assert await _deliver(client, SYNC, "old-2", OLD) == 401
    assert await queued_jobs(redis_url) == []


def test_every_secret_is_compared_in_constant_time_whichever_matches(monkeypatch):
    from app.webhooks import matching_secret

    calls: list[bytes] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append(a)
        return real(a, b)

    monkeypatch.setattr(app.webhooks.hmac, "compare_digest", counting)
    secrets = (SECRET.encode(), OLD.encode())
    assert matching_secret(secrets, PING, sign(SECRET, PING)) == 0
    assert matching_secret(secrets, PING, sign(OLD, PING)) == 1
    assert matching_secret(secrets, PING, sign(OTHER, PING)) is None
    assert len(calls) == 6  # two comparisons per delivery, even when the first matched


def test_settings_read_the_previous_secret_and_never_show_either():
    env = {"GITHUB_WEBHOOK_SECRET": SECRET, "GITHUB_WEBHOOK_SECRET_PREVIOUS": OLD}
    both = WebSettings.from_env(env)
    assert both.webhook_secrets == (SECRET, OLD)
    assert SECRET not in repr(both) and OLD not in repr(both)
    assert "previous_webhook_secret='**********'" in repr(both)
    for unset in ("", SECRET):  # empty (unset) or the current one again: one secret
        env["GITHUB_WEBHOOK_SECRET_PREVIOUS"] = unset
        assert WebSettings.from_env(env).webhook_secrets == (SECRET,)
    env["GITHUB_WEBHOOK_SECRET_PREVIOUS"] = "  "  # a mistake, not "no rotation": said so
    with pytest.raises(SettingsError, match="^GITHUB_WEBHOOK_SECRET_PREVIOUS is only blanks"):
        WebSettings.from_env(env)


def test_the_previous_secret_never_replaces_the_current_one():
    with pytest.raises(SettingsError, match="GITHUB_WEBHOOK_SECRET is not set"):
        WebSettings.from_env({"GITHUB_WEBHOOK_SECRET_PREVIOUS": OLD})
