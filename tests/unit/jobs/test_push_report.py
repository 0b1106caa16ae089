"""A push's stored run gets its report (issue 35): rendered as ``llmgate run`` renders a run
without a base (the same page, but for its note), stored as a gate's (worker/report/store.py),
linked from the history's branch run and so from the dashboard's run page and chart tooltips.

Real Redis and git, the worker's own start-up (its settings read from the environment), the fake
GitHub for the installation token, the real web app for ``GET /reports/<id>``, the dashboard's
routes over the same Redis, and ``llmgate run`` as a process.
"""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import pytest
from redis.asyncio import Redis

import tests.unit.baseline_support as support
from app.dashboard.charts import number
from tests.conftest import free_port
from tests.unit.app.dashboard.support import FixedReposAccess, dashboard
from tests.unit.app_support import running_app, settings
from tests.unit.baseline_support import build_field_repo, push_payload
from tests.unit.monorepo_support import build_monorepo
from tests.unit.worker_support import OWNER, REPO
from worker import history_contract as history
from worker.baselines.store import BaselineStore
from worker.contract import REPORT_KEY_PREFIX, REPORT_REPO_SUFFIX
from worker.jobs.push import store_baseline
from worker.main import shutdown, startup
from worker.report.store import DEFAULT_REPORT_TTL_S, ReportStore

github = support.github  # fixture

KEY = f"{OWNER}/{REPO}"
PUBLIC = "https://llmgate.example.test"
RUN_PAGE = "/dashboard/{repo}/runs/{sha}"


@pytest.fixture()
async def reporting_ctx(github: Any, monkeypatch: pytest.MonkeyPatch,
                        ) -> AsyncIterator[dict[str, Any]]:
    """A started worker's job context with reports on (``LLMGATE_PUBLIC_URL``)."""
    monkeypatch.setenv("LLMGATE_PUBLIC_URL", PUBLIC + "/")
    ctx: dict[str, Any] = {}
    await startup(ctx)
    try:
        yield ctx
    finally:
        await shutdown(ctx)


async def _run_page(redis: Redis, sha: str) -> str:
    """The dashboard's page of the branch run at ``sha`` (HTML)."""
    async with dashboard(redis, FixedReposAccess([KEY])) as web:
        page = await web.get(RUN_PAGE.format(repo=KEY, sha=sha))
    assert page.status_code == 200
    return page.text


async def test_a_push_stores_its_report_and_the_history_and_run_page_link_it(
        reporting_ctx, redis_url, tmp_path):
    services = reporting_ctx["services"]
    repo = tmp_path / "repo"
    shas = build_field_repo(repo)
    result = await store_baseline(reporting_ctx, push_payload(str(repo), shas["m9"], 2000))
    assert result["status"] == "stored"
    run = await history.get_run(services.redis, KEY, shas["m9"])
    assert run is not None and run["kind"] == "branch"
    url, report_id = run["report_url"], run["report_id"]
    assert url == f"{PUBLIC}/reports/{report_id}" and re.fullmatch("[0-9a-f]{32}", report_id)
    key = REPORT_KEY_PREFIX + report_id
    assert await services.cache.get(key + REPORT_REPO_SUFFIX) == KEY.encode()  # login check
    assert DEFAULT_REPORT_TTL_S - 60 < await services.cache.ttl(key) <= DEFAULT_REPORT_TTL_S
    async with running_app(settings(redis_url)) as web:
        page = await web.get(f"/reports/{report_id}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    cli = tmp_path / "cli.html"  # what `llmgate run` writes for the pushed commit, no base
    subprocess.run([sys.executable, "-m", "worker.cli", "run", "-q", "--head", shas["m9"],
                    "--format", f"html:{cli}"], cwd=repo, check=True, timeout=120)
    assert page.text == cli.read_text(encoding="utf-8").replace(
        "no base given: only absolute rules (min) apply",
        f"the push of {shas['m9'][:7]} to main: no base, only absolute rules (min) apply")
    assert f'<a href="{url}" rel="noreferrer">full report</a>' in \
        await _run_page(services.redis, shas["m9"])
    async with dashboard(services.redis, FixedReposAccess([KEY])) as web:
        repo_page = (await web.get(f"/dashboard/{KEY}")).text
    rate = run["suites"][0]["metrics"]["pass_rate"]["value"]
    assert re.search(rf"<title>{shas['m9'][:7]}: {re.escape(number(rate))} [^<]* · full report"
                     "</title>", repo_page)  # the chart point says its run has a report


async def test_without_a_public_url_no_report_is_stored_or_linked(github, redis_url, tmp_path):
    ctx: dict[str, Any] = {}
    await startup(ctx)
    try:
        repo = tmp_path / "repo"
        shas = build_field_repo(repo)
        result = await store_baseline(ctx, push_payload(str(repo), shas["m9"], 2000))
        services = ctx["services"]
        assert result["status"] == "stored" and services.reports is None
        run = await history.get_run(services.redis, KEY, shas["m9"])
        assert run is not None and (run["report_url"], run["report_id"]) == ("", "")
        assert await services.cache.keys(REPORT_KEY_PREFIX + "*") == []
        assert "full report" not in await _run_page(services.redis, shas["m9"])
    finally:
        await shutdown(ctx)


async def test_a_report_redis_refuses_and_the_baseline_is_stored_all_the_same(
        reporting_ctx, tmp_path, caplog):
    services = reporting_ctx["services"]
    refused = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    reporting_ctx["services"] = replace(services, reports=ReportStore(
        refused, services.reports.settings))
    repo = tmp_path / "repo"
    shas = build_field_repo(repo)
    with caplog.at_level(logging.WARNING, logger="llmgate.worker"):
        result = await store_baseline(reporting_ctx, push_payload(str(repo), shas["m9"], 2000))
    await refused.aclose()
    assert result["status"] == "stored"
    pointer = await BaselineStore(services.redis).latest(KEY, "main")
    assert pointer is not None and pointer["sha"] == shas["m9"]  # the baseline is kept
    run = await history.get_run(services.redis, KEY, shas["m9"])
    assert run is not None and run["report_url"] == "" and run["suites"]  # recorded, no link
    [line] = [r.getMessage() for r in caplog.records if "report not stored" in r.getMessage()]
    assert line.startswith(f"push of {KEY}@{shas['m9'][:7]}: report not stored "
                           "(ConnectionError): Error 111 connecting to 127.0.0.1:")
    assert "Connect call failed" in line  # the error's text reaches the log
    assert "full report" not in await _run_page(services.redis, shas["m9"])


async def test_each_config_of_a_push_stores_its_report_and_the_run_page_links_each(
        reporting_ctx, redis_url, tmp_path):
    services = reporting_ctx["services"]
    repo = tmp_path / "mono"
    shas = build_monorepo(repo, listed=False)  # services/a and services/b, no root config
    result = await store_baseline(reporting_ctx, push_payload(str(repo), shas["main"], 1000))
    assert result["configs"] == "services/a/.llmgate.yml=stored,services/b/.llmgate.yml=stored"
    run = await history.get_run(services.redis, KEY, shas["main"])
    assert run is not None
    links = run["reports"]
    assert [link["folder"] for link in links] == ["services/a", "services/b"]
    assert run["report_url"] in [link["report_url"] for link in links]  # the last config's
    async with running_app(settings(redis_url)) as web:
        pages = [await web.get(urlsplit(link["report_url"]).path) for link in links]
    for link, page in zip(links, pages, strict=True):
        assert page.status_code == 200
        assert f"{link['folder']}/.llmgate.yml" in page.text  # each config's own report
    text = await _run_page(services.redis, shas["main"])
    assert "full reports: " + ", ".join(
        f'<a href="{link["report_url"]}" rel="noreferrer">{link["folder"]}</a>'
        for link in links) in text
