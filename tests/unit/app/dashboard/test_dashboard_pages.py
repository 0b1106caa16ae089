"""The dashboard's pages over 200 real stored runs (worker/baselines/timeline.py into the
session's redis-server), through the ASGI app: charts, JSON, CSV, escaping, and the one 404 for
a repository that is unknown or refused."""

from __future__ import annotations

import csv
import io
import re
from urllib.parse import quote

import pytest
from starlette.requests import Request

from app.dashboard.charts import number
from app.dashboard.pages import Missing, example_target, wants_json
from tests.unit.app.dashboard.support import (
    HIDDEN,
    ODD_SUITE,
    REPO,
    RUNS,
    SCRIPT_ID,
    UNICODE_ID,
    WHY,
    FixedReposAccess,
    dashboard,
    sha,
    write_history,
)
from worker import history_contract as history

pytestmark = pytest.mark.filterwarnings("ignore:Call to deprecated close:DeprecationWarning")
JSON = {"accept": "application/json"}
BASE = f"/dashboard/{REPO}"


@pytest.fixture()
async def stored(redis):
    """200 branch runs and two gates of `REPO`, a few runs of `HIDDEN`."""
    await write_history(redis)
    await write_history(redis, HIDDEN, runs=3)
    return redis


def _seg(text: str) -> str:
    return quote(text, safe="")


def _chart(page: str, title: str) -> str:
    """Return the trend chart's SVG whose accessible name is ``title`` (escaped)."""
    match = re.search(r'<svg [^>]*aria-label="' + re.escape(title) + r'" font-family.*?</svg>',
                      page, re.S)
    assert match, f"no chart {title}"
    return match.group(0)


async def test_the_repository_page_charts_each_point_with_its_interval_and_run(stored):
    newest = (await history.list_branch_runs(stored, REPO, limit=1))[0]
    rate = next(s for s in newest["suites"] if s["suite"] == "tickets")["metrics"]["pass_rate"]
    async with dashboard(stored, FixedReposAccess([REPO])) as web:
        page = await web.get(BASE)
        more = await web.get(BASE + "?runs=500")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script" not in csp
    assert "<script" not in page.text and "http://" not in page.text.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    chart = _chart(page.text, "tickets · pass_rate")
    tip = (f"<title>{sha(RUNS - 1)[:7]}: {number(rate['value'])} "
           f"[{number(rate['ci_low'])}, {number(rate['ci_high'])}]")
    assert tip in chart  # the newest point: its commit, value and interval
    links = re.findall(r'<a href="([^"]+)">', chart)
    assert len(links) == 100  # the newest 100 runs by default, oldest first
    assert links[-1] == f"{BASE}/runs/{sha(RUNS - 1)}" and links[0] == f"{BASE}/runs/{sha(100)}"
    assert len(re.findall(r'<a href="', _chart(more.text, "tickets · pass_rate"))) == RUNS
    assert "cost (USD) per run" in page.text and "duration (s) per run" in page.text
    assert WHY in page.text and "maintainer" in page.text  # the gates: Why, accepted by


async def test_json_answers_are_the_records(stored):
    async with dashboard(stored, FixedReposAccess([REPO, HIDDEN])) as web:
        repo = (await web.get(BASE, headers=JSON)).json()
        run = (await web.get(f"{BASE}/runs/{sha(5)}", headers=JSON)).json()
        gate = (await web.get(f"{BASE}/runs/pr7-555", headers=JSON)).json()
        index = (await web.get("/dashboard", headers=JSON)).json()
    assert repo["branch_runs"] == await history.list_branch_runs(stored, REPO, limit=100)
    assert repo["pr_gates"] == await history.list_pr_gates(stored, REPO)
    assert repo["counts"] == {"branch_runs": RUNS, "pr_gates": 2}
    assert run == await history.get_run(stored, REPO, sha(5))
    assert gate["accepted"]["by"] == "maintainer" and gate["why"] == WHY
    assert repo["flaky"][0]["example_id"] == SCRIPT_ID  # flips every run
    assert repo["flaky"][0]["changes"] == 29  # over the newest 30 runs
    assert sorted(r["repo"] for r in index["repositories"]) == [HIDDEN, REPO]
    [mine] = [r for r in index["repositories"] if r["repo"] == REPO]
    assert mine["latest"] == (await history.list_branch_runs(stored, REPO, limit=1))[0]
    assert len(mine["trends"]["tickets|pass_rate"]) == 30


async def test_the_csv_has_one_row_per_run_suite_and_metric(stored):
    async with dashboard(stored, FixedReposAccess([REPO])) as web:
        got = await web.get(BASE + "/history.csv")
    assert got.headers["content-type"] == "text/csv; charset=utf-8"
    rows = list(csv.DictReader(io.StringIO(got.text)))
    runs = await history.list_branch_runs(stored, REPO, limit=500)
    assert len(rows) == sum(len(s["metrics"]) for r in runs for s in r["suites"])
    assert rows[0]["sha"] == sha(0) and rows[-1]["sha"] == sha(RUNS - 1)  # oldest first
    newest = next(s for s in runs[0]["suites"] if s["suite"] == "tickets")
    [row] = [r for r in rows if r["sha"] == sha(RUNS - 1) and r["suite"] == "tickets"
             and r["metric"] == "pass_rate"]
    rate = newest["metrics"]["pass_rate"]
    assert (float(row["value"]), float(row["ci_low"]), float(row["ci_high"])) == (
        rate["value"], rate["ci_low"], rate["ci_high"])
    assert (row["examples"], row["passed"], row["duration_s"]) == (
        str(newest["examples"]), str(newest["passed"]), repr(float(10 + RUNS - 1)))
    assert {r["suite"] for r in rows} == {"tickets", ODD_SUITE}


async def test_markup_and_unicode_in_ids_are_escaped_on_every_page(stored):
    example = f"{BASE}/examples/{_seg(ODD_SUITE)}/{_seg(SCRIPT_ID)}"
    async with dashboard(stored, FixedReposAccess([REPO])) as web:
        pages = [await web.get(url) for url in (
            "/dashboard", BASE, f"{BASE}/runs/{sha(3)}", example,
            f"{BASE}/examples/tickets/{_seg(UNICODE_ID)}")]
    for page in pages:
        assert page.status_code == 200, page.url
        assert "<script" not in page.text and "<i>ü" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[1].text  # the flaky list
    assert f'href="{example}"' in pages[1].text  # ... links to the example's page
    assert "&lt;i&gt;ü&lt;/i&gt;/x" in pages[2].text and UNICODE_ID in pages[2].text
    assert UNICODE_ID in pages[4].text


async def test_an_example_page_shows_the_branch_and_the_pull_requests(stored):
    async with dashboard(stored, FixedReposAccess([REPO])) as web:
        got = (await web.get(f"{BASE}/examples/tickets/{_seg(SCRIPT_ID)}", headers=JSON)).json()
        html = await web.get(f"{BASE}/examples/tickets/ex-011")
    assert (got["suite"], got["example_id"]) == ("tickets", SCRIPT_ID)
    assert len(got["branch"]) == 100 and got["branch"][0]["run_id"] == sha(RUNS - 1)
    assert [p["status"] for p in got["branch"][:2]] == [history.FAILED, history.PASSED]
    assert [p["pr_number"] for p in got["pull_requests"]] == [8, 7]
    assert html.status_code == 200 and "#7" in html.text


async def test_a_refused_repository_is_a_404_like_an_unknown_one_on_every_route(stored):
    access = FixedReposAccess([REPO])
    paths = ["", "/history.csv", f"/runs/{sha(0)}", "/examples/tickets/ex-002"]
    async with dashboard(stored, access) as web:
        for path in paths:
            for headers in ({}, JSON):
                refused = await web.get(f"/dashboard/{HIDDEN}{path}", headers=headers)
                unknown = await web.get(f"/dashboard/octo/nothing{path}", headers=headers)
                assert (refused.status_code, unknown.status_code) == (404, 404), path
                # The same page but for the path its sign-in link comes back to.
                assert refused.content == unknown.content.replace(
                    b"octo/nothing", HIDDEN.encode()), path
                assert refused.headers["content-type"] == unknown.headers["content-type"]
        missing_run = await web.get(f"{BASE}/runs/{'0' * 40}", headers=JSON)
        index = await web.get("/dashboard")
        listed = (await web.get("/dashboard", headers=JSON)).json()
    assert HIDDEN in access.asked  # asked, and refused
    assert (missing_run.status_code, missing_run.content) == (404, refused.content)  # JSON
    assert HIDDEN not in index.text
    assert [r["repo"] for r in listed["repositories"]] == [REPO]


async def test_no_redis_is_a_503(redis):
    async with dashboard(None, FixedReposAccess([REPO])) as web:
        got = await web.get(BASE, headers=JSON)
    assert got.status_code == 503 and got.json()["error"] == "unavailable"


def test_json_is_answered_only_when_preferred():
    assert wants_json("application/json")
    assert wants_json("application/json, text/html;q=0.5")
    assert not wants_json("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
    assert not wants_json("text/html, application/json")  # a tie: HTML
    assert not wants_json("")
    assert not wants_json("*/*")


async def test_a_new_run_shows_at_once_despite_the_page_cache(redis):
    await write_history(redis, runs=3)
    async with dashboard(redis, FixedReposAccess([REPO])) as web:
        first = await web.get(BASE)
        again = await web.get(BASE)
        await write_history(redis, runs=4)  # run 3 is new; runs 0-2 and the gates rewritten
        after = await web.get(BASE)
        every = await web.get(BASE + "?metrics=all")
    assert first.text == again.text and sha(3)[:7] not in first.text
    assert f"<title>{sha(3)[:7]}: " in after.text
    assert len(re.findall(r'<svg [^>]*font-family', every.text)) > 2 * 10  # every metric


@pytest.mark.parametrize(("raw", "target"), [
    (b"/dashboard/o/r/examples/examples/e1", ("examples", "e1")),
    (b"/dashboard/o/r/examples/a%2Fexamples%2Fb/examples", ("a/examples/b", "examples")),
    (b"/dashboard/o/r/examples/tickets/ex-1?x=1", ("tickets", "ex-1"))])
def test_an_example_path_is_read_from_its_last_two_segments(raw: bytes,
                                                            target: tuple[str, str]) -> None:
    """Field case (fresh-clone review): a suite named ``examples`` had no example pages (the
    path was split at its last ``/examples/``)."""
    def request(path: bytes) -> Request:
        return Request({"type": "http", "method": "GET", "path": path.decode(),
                        "raw_path": path, "query_string": b"", "headers": []})

    assert example_target(request(raw)) == target
    for bad in (b"/dashboard/o/r/examples/tickets", b"/dashboard/o/r/examples/tickets/",
                b"/dashboard/o/r/runs/a/b"):
        with pytest.raises(Missing):
            example_target(request(bad))
