"""The pure parts of notifications: the operator's settings, the ``notify`` key of the config,
the bodies and their signature, ``Retry-After`` and the backoff, the verdict of a report.

The deliveries themselves (real HTTP, real arq, real Redis and git) are tested in
tests/unit/jobs/test_notify_jobs.py.
"""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from tests.unit.baseline_support import config
from worker.errors import ConfigError
from worker.evals.config.load import parse_config, read_notify
from worker.evals.types import GateReport, RuleOutcome
from worker.notify.channels import MAX_BACKOFF_S, MAX_RETRY_AFTER_S, NotifySettings
from worker.notify.deliver import request, retry_after_s
from worker.notify.message import build_notice, commit_url, slack_text
from worker.notify.verdict import PushVerdict, verdict_of
from worker.runtime.settings import SettingsError

SHA, PREVIOUS = "a" * 40, "b" * 40
SLACK = "https://hooks.slack.com/services/T0/B0/very-secret-path"


def outcome(status: str = "fail", **more: object) -> RuleOutcome:
    values: dict = {"suite": "tickets", "metric": "pass_rate", "rule": "max_drop 0.05",
                    "base": 0.9, "head": 0.6, "delta": -0.3, "status": status,
                    "reason": "dropped 0.30 from base 0.90 (allowed 0.05)", **more}
    return RuleOutcome(**values)


# --- settings ------------------------------------------------------------------------------

def test_settings_are_off_unless_a_url_is_set() -> None:
    assert NotifySettings.from_env({}).channels == ()
    both = NotifySettings.from_env({"LLMGATE_NOTIFY_SLACK_URL": SLACK,
                                    "LLMGATE_NOTIFY_WEBHOOK_URL": "http://10.0.0.1/hook"})
    assert both.channels == ("slack", "webhook")
    assert both.url("slack") == SLACK


def test_settings_never_show_a_secret() -> None:
    settings = NotifySettings(SLACK, "https://example.com/h", "signing-secret-123")
    assert "very-secret-path" not in repr(settings) and "signing" not in repr(settings)
    with pytest.raises(SettingsError) as err:
        NotifySettings.from_env({"LLMGATE_NOTIFY_SLACK_URL": "hooks.slack.com/very-secret"})
    assert str(err.value).startswith("LLMGATE_NOTIFY_SLACK_URL must be an http(s) URL")
    assert "very-secret" not in str(err.value)
    with pytest.raises(SettingsError, match="LLMGATE_NOTIFY_WEBHOOK_URL is not"):
        NotifySettings.from_env({"LLMGATE_NOTIFY_WEBHOOK_SECRET": "signing-secret-123"})
    with pytest.raises(SettingsError, match="LLMGATE_NOTIFY_MAX_TRIES must be a whole number"):
        NotifySettings.from_env({"LLMGATE_NOTIFY_MAX_TRIES": "0"})


@pytest.mark.parametrize("url", [
    "https://hooks.slack.com:44x3/services/T0/B0/x", "https://hooks.slack.com/services/T0 B0",
    "https://hooks.slack.com/services/\tT0", "https://hooks.slack.com/services/T0/Bé",
    "https://hooks.slack.com/services/./T0/B0", "https://hooks.slack.com/a/../services/T0",
    "https:///services/T0/B0"])
def test_a_url_a_log_line_would_spell_differently_is_refused_at_start(url: str) -> None:
    """Field case (fresh-clone review): a URL with a bad port or a tab passed the start-up
    check and failed every delivery; one with spaces, non-ASCII characters or dot segments is
    sent percent-encoded or normalised, so httpx's request log line printed it unredacted."""
    with pytest.raises(SettingsError) as err:
        NotifySettings.from_env({"LLMGATE_NOTIFY_SLACK_URL": url})
    assert "LLMGATE_NOTIFY_SLACK_URL must be an http(s) URL" in str(err.value)
    assert "T0" not in str(err.value)


def test_the_redactor_hides_each_urls_secret_part_however_its_host_is_spelled() -> None:
    """Field case (fresh-clone review): httpx logs ``HTTP://HOOKS.SLACK.COM:443/...`` as
    ``https://hooks.slack.com/...``, which the URL as typed did not match."""
    from worker.security.redact import Redactor

    typed = "HTTPS://HOOKS.SLACK.COM:443/services/T0/B0/very-secret-path?x=1"
    settings = NotifySettings.from_env({"LLMGATE_NOTIFY_SLACK_URL": typed,
                                        "LLMGATE_NOTIFY_WEBHOOK_URL": "http://10.0.0.1/"})
    redactor = Redactor()
    redactor.add(*settings.secrets())
    line = redactor.redact('HTTP Request: POST https://hooks.slack.com/services/T0/B0/'
                           'very-secret-path?x=1 "HTTP/1.1 200 OK"')
    assert "very-secret-path" not in line and "hooks.slack.com" in line
    assert "/" not in settings.secrets()  # a short path is not redacted on its own


def test_backoff_doubles_and_a_longer_retry_after_wins() -> None:
    settings = NotifySettings(backoff_s=2)
    assert [settings.delay_s(n) for n in (1, 2, 3)] == [2, 4, 8]
    assert settings.delay_s(30) == MAX_BACKOFF_S
    assert settings.delay_s(1, 30.0) == 30.0
    assert settings.delay_s(3, 1.0) == 8  # a shorter Retry-After does not shorten the backoff
    assert settings.delay_s(1, 10**9) == MAX_RETRY_AFTER_S


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert retry_after_s("120") == 120.0
    assert retry_after_s("Sun, 06 Dec 2026 21:00:30 GMT", now=1796590800.0) == 30.0
    assert retry_after_s("Sun, 06 Dec 2026 20:00:00 GMT", now=1796590800.0) == 0.0
    assert retry_after_s(None) is None and retry_after_s("soon") is None


# --- the `notify` key ----------------------------------------------------------------------

@pytest.mark.parametrize(("extra", "error"), [
    ("notify:\n  suites: [nope]\n",
     ".llmgate.yml:16: `notify.suites` names 'nope', which is not a suite of this config "
     "(suites: score)"),
    ("notify:\n  suites: some\n",
     ".llmgate.yml:16: `notify.suites` must be `all` or a non-empty list of suite names, "
     "got 'some'"),
    ("notify:\n  suites: []\n",
     ".llmgate.yml:16: `notify.suites` must be `all` or a non-empty list of suite names, got []"),
    ("notify:\n  suites: [score, score]\n", ".llmgate.yml:16: `notify.suites` names 'score' twice"),
    ("notify:\n  slack: https://hooks.slack.com/x\n",
     ".llmgate.yml:16: `notify`: unknown key 'slack' (known keys: suites)"),
    ("notify: true\n", ".llmgate.yml:15: `notify` must be a mapping (key: value lines)"),
    ("notify: {}\n", ".llmgate.yml:15: `notify` is missing `suites` (`all`, or a list of suite "
     "names)"),
])
def test_a_bad_notify_key_is_an_error_on_its_line(extra: str, error: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(config() + extra)
    assert str(err.value) == error


def test_a_root_config_listing_configs_may_not_notify() -> None:
    """Field case (fresh-clone review): a monorepo's root config that only lists its configs
    took ``notify: {suites: all}`` silently, and no push ever notified (each config opts in)."""
    text = "version: 1\nconfigs: [services/a]\nnotify:\n  suites: all\n"
    with pytest.raises(ConfigError) as err:
        parse_config(text)
    assert str(err.value) == (
        ".llmgate.yml:3: `notify` in a root config that only lists other configs would notify "
        "nothing: a push is compared per config, so put `notify:` in each listed config that "
        "should notify")


def test_the_push_reads_the_opt_in_of_its_config(tmp_path) -> None:
    (tmp_path / ".llmgate.yml").write_text(config() + "notify:\n  suites: [score]\n")
    options = read_notify(tmp_path)
    assert options is not None and options.suites == ("score",) and options.line == 16
    assert options.selects(["score", "other"]) == ("score",)
    (tmp_path / ".llmgate.yml").write_text(config() + "notify: {suites: all}\n")
    assert read_notify(tmp_path).selects(["score", "other"]) == ("score", "other")
    (tmp_path / ".llmgate.yml").write_text(config())
    assert read_notify(tmp_path) is None


# --- the verdict of a report ---------------------------------------------------------------

def test_a_failed_report_regresses_and_an_undecided_one_is_told() -> None:
    failed = GateReport("failure", (outcome("pass"), outcome()), (), None, None)
    assert verdict_of(failed, PREVIOUS) == PushVerdict("regressed", PREVIOUS, (outcome(),))
    open_rule = outcome("inconclusive", effect="undecided", reason="too few examples")
    undecided = GateReport("action_required", (open_rule,), (), None, None,
                           headline="base could not be evaluated")
    assert verdict_of(undecided, PREVIOUS) == PushVerdict(
        "undecided", PREVIOUS, (open_rule,), "base could not be evaluated")
    assert verdict_of(GateReport("success", (outcome("pass"),), (), None, None),
                      PREVIOUS).status == "passed"
    broken = GateReport("failure", (), (), None, None,
                        config_error=ConfigError("evals/a.jsonl", 3, "missing `id`"))
    assert verdict_of(broken, PREVIOUS) == PushVerdict(
        "undecided", PREVIOUS, reason="evals/a.jsonl:3: missing `id`")


# --- the bodies ----------------------------------------------------------------------------

def notice(**more: object):
    verdict = PushVerdict("regressed", PREVIOUS, (outcome(suite="a<b>&c"),))
    values: dict = {"repository": "acme/bot", "folder": "", "branch": "main", "sha": SHA,
                    "clone_url": "https://github.com/acme/bot.git", **more}
    return build_notice(verdict, **values)


def test_commit_links_come_from_an_http_clone_url() -> None:
    assert commit_url("https://github.com/acme/bot.git", SHA) == \
        f"https://github.com/acme/bot/commit/{SHA}"
    assert commit_url("https://ghe.example.com/acme/bot", SHA) == \
        f"https://ghe.example.com/acme/bot/commit/{SHA}"
    assert commit_url("/srv/git/bot", SHA) is None


def test_the_slack_text_links_the_commit_and_escapes_what_the_repository_wrote() -> None:
    text = slack_text(notice(report_url="https://llmgate.example.com/reports/" + "0" * 32))
    assert text.splitlines() == [
        f":rotating_light: *llmgate*: <https://github.com/acme/bot/commit/{SHA}|acme/bot@aaaaaaa>"
        " on `main` regressed against the previous push `bbbbbbb`",
        "• *a&lt;b&gt;&amp;c* `pass_rate` 0.9 → 0.6, rule `max_drop 0.05` fail: dropped 0.30 "
        "from base 0.90 (allowed 0.05)",
        f"<https://llmgate.example.com/reports/{'0' * 32}|Report>"]


def test_the_json_body_is_signed_and_slack_gets_only_text() -> None:
    settings = NotifySettings(SLACK, "https://example.com/h", "signing-secret-123")
    body, headers = request("webhook", notice(), settings)
    digest = hmac.new(b"signing-secret-123", body, hashlib.sha256).hexdigest()
    assert headers["X-Llmgate-Signature-256"] == f"sha256={digest}"
    assert json.loads(body)["version"] == 1
    assert json.loads(body)["commit_url"] == f"https://github.com/acme/bot/commit/{SHA}"
    slack, slack_headers = request("slack", notice(), settings)
    assert list(json.loads(slack)) == ["text"]
    assert "X-Llmgate-Signature-256" not in slack_headers


def test_reasons_are_redacted_and_a_passing_push_has_no_notice() -> None:
    verdict = PushVerdict("undecided", PREVIOUS, reason="token ghs_secret leaked")
    found = build_notice(verdict, repository="acme/bot", folder="svc", branch="main", sha=SHA,
                         clone_url="", redact=lambda t: t.replace("ghs_secret", "[redacted]"))
    assert (found["event"], found["reason"], found["config"]) == \
        ("undecided", "token [redacted] leaked", "svc")
    with pytest.raises(ValueError, match="no notice"):
        build_notice(PushVerdict("passed", PREVIOUS), repository="acme/bot", folder="",
                     branch="main", sha=SHA, clone_url="")


@pytest.mark.parametrize(("extra", "valid"), [
    ("notify: {suites: all}\n", True),
    ("notify: {suites: [s]}\n", True),
    ("notify: {suites: []}\n", False),
    ("notify: {suites: [s, s]}\n", False),
    ("notify: {suites: every}\n", False),
    ("notify: {suites: all, url: 'https://hooks.slack.com/x'}\n", False),
    ("notify: {}\n", False),
])
def test_the_schema_and_the_loader_agree_on_notify(extra: str, valid: bool) -> None:
    from tests.unit.evals.config.test_config_schema import MINIMAL, loader_accepts, schema_errors

    assert (loader_accepts(MINIMAL + extra) is None) == valid
    assert (schema_errors(MINIMAL + extra) == []) == valid


# --- one POST ------------------------------------------------------------------------------

async def test_a_receiver_dripping_its_answer_is_cut_off_as_a_timeout(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Field case (fresh-clone review): httpx's timeout bounds each read, so a receiver that
    sent a byte every 3 s held a delivery try (and one of the worker's job slots) for as long
    as it liked. The whole POST is bounded now (`POST_TOTAL_S`; 1 s here)."""
    import socket
    import threading
    import time

    import httpx

    from worker.notify import deliver

    monkeypatch.setattr(deliver, "POST_TOTAL_S", 1.0)
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Pad: " + b"a" * 100:
                if stop.wait(0.2):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.getsockname()[1]}/hook"
    started = time.monotonic()
    try:
        async with httpx.AsyncClient() as http:
            attempt = await deliver.post(http, url, b"{}", {})
    finally:
        stop.set()
        thread.join(5)
        server.close()
    assert (attempt.delivered, attempt.permanent, attempt.error) == (False, False,
                                                                      "TimeoutError")
    assert time.monotonic() - started < 5  # the drip alone would take 20 s
