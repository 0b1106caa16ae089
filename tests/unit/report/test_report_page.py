"""The full report behind the check run's Details link: stored by the worker, served by the web."""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from arq import create_pool
from arq.worker import create_worker
from redis.asyncio import Redis

from app.reports import REPORT_SCRIPT_HASH
from tests.conftest import free_port
from tests.fakes.fake_github import FakeGitHubServer
from tests.unit.app_support import running_app, settings
from tests.unit.worker_support import (
    build_tiny_repo,
    fake_github_env,
    gate_payload,
)
from worker.contract import REPORT_KEY_PREFIX, REPORT_REPO_SUFFIX, gate_job_id
from worker.github.checks import CheckOutput
from worker.main import worker_settings
from worker.report.html_report import SCRIPT_SHA256
from worker.report.store import (
    DEFAULT_REPORT_TTL_S,
    ReportSettings,
    ReportStore,
    render_page,
    store_report,
)
from worker.runtime.settings import SettingsError

ROOT = Path(__file__).parents[3]
PUBLIC = "https://llmgate.example.test"
HOSTILE = CheckOutput("llmgate: <script>alert(1)</script>",
                      "## Summary\n| suite | pass |\n|---|---|\n| a&b | 3 |",
                      'Example `x` said "<img src=x onerror=alert(1)>"')


def test_settings_are_opt_in_and_checked() -> None:
    assert ReportSettings.from_env({}) is None
    assert ReportSettings.from_env({"LLMGATE_PUBLIC_URL": " "}) is None
    assert ReportSettings.from_env({"LLMGATE_PUBLIC_URL": PUBLIC + "/"}) == ReportSettings(
        PUBLIC, DEFAULT_REPORT_TTL_S)
    assert ReportSettings.from_env({"LLMGATE_PUBLIC_URL": PUBLIC + "/gate",
                                    "LLMGATE_REPORT_TTL_S": "3600"}) == ReportSettings(
        PUBLIC + "/gate", 3600)
    assert DEFAULT_REPORT_TTL_S == 30 * 24 * 3600
    for url in ("llmgate.example.test", "ftp://x.test", "https://", "https://x.test/?a=1"):
        with pytest.raises(SettingsError, match="^LLMGATE_PUBLIC_URL must be"):
            ReportSettings.from_env({"LLMGATE_PUBLIC_URL": url})
    for ttl in ("59", "31536001", "1d", "-5"):
        with pytest.raises(SettingsError, match="^LLMGATE_REPORT_TTL_S must be a whole number"):
            ReportSettings.from_env({"LLMGATE_PUBLIC_URL": PUBLIC, "LLMGATE_REPORT_TTL_S": ttl})


def test_the_page_escapes_every_piece_of_text() -> None:
    page = render_page(HOSTILE, datetime(2030, 1, 2, 3, 4, tzinfo=UTC), 2 * 86400)
    assert "<script>" not in page and "<img" not in page
    assert "<title>llmgate: &lt;script&gt;alert(1)&lt;/script&gt;</title>" in page
    assert ("<pre>## Summary\n| suite | pass |\n|---|---|\n| a&amp;b | 3 |\n\n"
            "Example `x` said &quot;&lt;img src=x onerror=alert(1)&gt;&quot;</pre>") in page
    assert "made 2030-01-02 03:04 UTC; the link works for 2 day(s)." in page


async def test_a_stored_report_is_served_with_a_strict_policy(redis_url: str,
                                                              redis: Redis) -> None:
    store = ReportStore(redis, ReportSettings(PUBLIC, 3600))
    url = await store_report(store, HOSTILE)
    assert url is not None
    match = re.fullmatch(re.escape(PUBLIC) + r"/reports/([0-9a-f]{32})", url)
    assert match is not None
    report_id = match.group(1)
    assert 3590 < await redis.ttl(REPORT_KEY_PREFIX + report_id) <= 3600
    assert await store_report(store, HOSTILE) != url  # a fresh random id every time
    assert await store_report(None, HOSTILE) is None
    async with running_app(settings(redis_url)) as web:
        page = await web.get(f"/reports/{report_id}")
        missing = await web.get("/reports/" + "0" * 32)
        malformed = [await web.get(f"/reports/{bad}") for bad in
                     (report_id.upper(), report_id[:-1], report_id + "0", "..%2F..%2Fetc")]
        wrong_method = await web.post(f"/reports/{report_id}")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.text == render_page(HOSTILE, _made_at(page.text), 3600)
    csp = page.headers["content-security-policy"]
    assert csp.startswith("default-src 'none'; style-src 'unsafe-inline';")
    assert f"script-src '{SCRIPT_SHA256}';" in csp  # the HTML report's one script, no other
    assert (page.headers["x-content-type-options"], page.headers["referrer-policy"],
            page.headers["x-robots-tag"]) == ("nosniff", "no-referrer", "noindex, nofollow")
    assert (missing.status_code, missing.text) == (
        404, "No such report: it never existed or has expired.\n")
    assert [r.status_code for r in malformed] == [404, 404, 404, 404]
    assert wrong_method.status_code == 405


def _made_at(page: str) -> datetime:
    found = re.search(r"made (\d{4}-\d\d-\d\d \d\d:\d\d) UTC", page)
    assert found is not None
    return datetime.strptime(found.group(1), "%Y-%m-%d %H:%M").replace(tzinfo=UTC)


async def test_reports_without_redis_are_503() -> None:
    async with running_app(settings(f"redis://127.0.0.1:{free_port()}/0")) as web:
        answer = await web.get("/reports/" + "a" * 32)
    assert (answer.status_code, answer.text) == (
        503, "Reports are unavailable: Redis does not answer.\n")


async def test_a_report_redis_refuses_costs_only_the_link(
        caplog: pytest.LogCaptureFixture) -> None:
    dead = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
    try:
        assert await store_report(ReportStore(dead, ReportSettings(PUBLIC)), HOSTILE) is None
    finally:
        await dead.aclose()
    assert "could not store the report for its details link: ConnectionError" in caplog.text


def test_the_web_process_stays_light() -> None:
    code = ("import sys, app.main, app.reports; "
            "print(sorted(m for m in ('litellm', 'scipy', 'numpy', 'jinja2', 'worker.report.store',"
            " 'worker.github.client') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == "[]"


# ------------------------------------------------------------------ the check run's link
@pytest.fixture()
def github(monkeypatch: pytest.MonkeyPatch, redis_url: str,
           tmp_path: Path) -> Iterator[FakeGitHubServer]:
    """A fake GitHub and the worker's environment, with reports on."""
    with fake_github_env(monkeypatch, redis_url, tmp_path / "work", LLMGATE_PUBLIC_URL=PUBLIC,
                         LLMGATE_REPORT_TTL_S="600") as server:
        yield server


@pytest.mark.parametrize("public", [True, False], ids=["public-url", "no-public-url"])
async def test_a_gate_links_its_check_run_to_the_full_report(
        github: FakeGitHubServer, redis_url: str, redis: Redis, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, public: bool) -> None:
    if not public:
        monkeypatch.delenv("LLMGATE_PUBLIC_URL")
    shas = build_tiny_repo(tmp_path / "tiny")
    payload = gate_payload(str(tmp_path / "tiny"), shas["pr/drop"], shas["main"])
    settings_cls = worker_settings()
    pool = await create_pool(settings_cls.redis_settings)
    await pool.enqueue_job("gate_pull_request", payload,
                           _job_id=gate_job_id(payload["repo"], 1, payload["head_sha"]))
    await pool.aclose()
    worker = create_worker(settings_cls, burst=True, poll_delay=0.05, handle_signals=False,
                           cron_jobs=[])  # no sweeper cron: it would count as a job
    await worker.async_run()
    await worker.close()
    state = github.state()
    [run] = state["check_runs"]
    assert (run["status"], run["conclusion"]) == ("completed", "failure")
    assert state["violations"] == []
    stored = await redis.keys(REPORT_KEY_PREFIX + "*")
    if not public:  # the check page itself is the report
        assert (run["details_url"], stored) == (None, [])
        return
    assert run["details_url"].startswith(PUBLIC + "/reports/")
    key = REPORT_KEY_PREFIX + run["details_url"].rsplit("/", 1)[1]
    assert sorted(k.decode() for k in stored) == [key, key + REPORT_REPO_SUFFIX]
    assert await redis.get(key + REPORT_REPO_SUFFIX) == b"acme/tiny"  # who may read it
    assert 590 < await redis.ttl(key) <= 600  # LLMGATE_REPORT_TTL_S
    patches = [r for r in state["requests"] if r["operation"] == "checks/update"]
    assert [("details_url" in r["body"]) for r in patches] == [False] * (len(patches) - 1) + [
        True]  # once, with the completion
    async with running_app(settings(redis_url)) as web:
        page = await web.get(run["details_url"].removeprefix(PUBLIC))
    assert page.status_code == 200
    assert f"<title>{run['output']['title']}</title>" in page.text
    assert "bravo" in page.text  # the example that regressed
    assert 'id="examples"' in page.text  # the HTML report, as `llmgate run --format html`
    [script] = re.findall(r"<script>(.*?)</script>", page.text, re.DOTALL)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}';" in page.headers["content-security-policy"]


def test_the_policy_allows_exactly_the_html_reports_script() -> None:
    assert REPORT_SCRIPT_HASH == SCRIPT_SHA256
