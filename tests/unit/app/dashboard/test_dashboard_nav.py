"""The dashboard's nav (sign in / sign out on every page), the signed-out visitor of
``/dashboard`` sent to sign in (page 303, JSON 401), and the run page's commit link under the
configured GitHub web root; real stored history in the session's redis-server."""

from __future__ import annotations

import re
from urllib.parse import quote

import httpx
import pytest
from starlette.applications import Starlette

from app.dashboard.views import dashboard_routes
from tests.unit.app.dashboard.support import (
    HIDDEN,
    REPO,
    SCRIPT_ID,
    FixedReposAccess,
    dashboard,
    sha,
    write_history,
)

pytestmark = pytest.mark.filterwarnings("ignore:Call to deprecated close:DeprecationWarning")
JSON = {"accept": "application/json"}
BASE = f"/dashboard/{REPO}"
EXAMPLE = f"{BASE}/examples/tickets/{quote(SCRIPT_ID, safe='')}"
#: Every HTML page, and the 404 of a repository the user may not read.
PAGES = ("/dashboard", BASE, f"{BASE}/runs/{sha(2)}", EXAMPLE, f"/dashboard/{HIDDEN}")
SIGN_OUT = '<a href="/logout?next=/dashboard%3Fsigned_out%3D1">Sign out</a>'


@pytest.fixture()
async def stored(redis):
    """3 branch runs and two gates of `REPO`, 3 runs of `HIDDEN` (refused by the double)."""
    await write_history(redis, runs=3)
    await write_history(redis, HIDDEN, runs=3)
    return redis


def _nav(page: str) -> str:
    match = re.search(r"<nav>.*?</nav>", page, re.S)
    assert match, page[:500]
    return match.group(0)


async def test_signed_out_every_page_offers_sign_in_back_to_itself(stored):
    async with dashboard(stored, FixedReposAccess([REPO])) as web:
        got = {path: await web.get(path) for path in PAGES}
    for path, page in got.items():
        assert page.status_code == (404 if HIDDEN in path else 200), path
        nav = _nav(page.text)
        assert f'<a href="/login?next={quote(path, safe="/")}">Sign in with GitHub</a>' in nav
        assert "Sign out" not in page.text and "/logout" not in page.text
        assert "<script" not in page.text
    # The example's id is markup, percent-encoded in its path and encoded again in ``next``.
    assert "next=/dashboard/octo/widgets/examples/tickets/%253Cscript%253E" in got[EXAMPLE].text
    assert "Signed out? Sign in" in got[f"/dashboard/{HIDDEN}"].text


async def test_signed_in_every_page_names_the_user_and_offers_sign_out(stored):
    login = "<b>mona</b>&co"  # GitHub logins are plain, but the page escapes whatever it gets
    async with dashboard(stored, FixedReposAccess([REPO], login=login)) as web:
        got = {path: await web.get(path) for path in PAGES}
    for path, page in got.items():
        nav = _nav(page.text)
        assert f'<span class="muted">&lt;b&gt;mona&lt;/b&gt;&amp;co</span> · {SIGN_OUT}' in nav, \
            path
        assert "<b>mona" not in page.text and "Sign in with GitHub" not in page.text
    assert "Signed out?" not in got[f"/dashboard/{HIDDEN}"].text


async def test_the_cached_repository_page_names_its_own_user(stored):
    mona, hubot = FixedReposAccess([REPO], login="mona"), FixedReposAccess([REPO], login="hubot")
    async with dashboard(stored, mona) as web:
        first = await web.get(BASE)
        mona.login = "hubot"  # the same pages (and cache), another user
        second = await web.get(BASE)
        mona.login = None
        third = await web.get(BASE)
    assert ">mona<" in first.text and ">hubot<" not in first.text
    assert ">hubot<" in second.text and ">mona<" not in second.text
    assert "Sign in with GitHub" in third.text and "Sign out" not in third.text
    assert hubot.login == "hubot"


async def test_a_signed_out_visitor_who_may_read_nothing_is_sent_to_sign_in(stored):
    async with dashboard(stored, FixedReposAccess([])) as web:
        page = await web.get("/dashboard")
        data = await web.get("/dashboard", headers=JSON)
        after_sign_out = await web.get("/dashboard?signed_out=1")
        json_after = await web.get("/dashboard?signed_out=1", headers=JSON)
    assert page.status_code == 303
    assert page.headers["location"] == "/login?next=%2Fdashboard"
    assert page.headers["cache-control"] == "no-store"
    for answer in (data, json_after):  # JSON never redirects
        assert answer.status_code == 401 and answer.json() == {"error": "sign in"}
        assert answer.headers["cache-control"] == "no-store"
    # Where sign-out lands: not sent back to GitHub (which signs an authorized user in at once).
    assert after_sign_out.status_code == 200
    assert "You are signed out." in after_sign_out.text
    assert '<a href="/login?next=/dashboard">Sign in with GitHub</a>' in after_sign_out.text
    assert REPO not in after_sign_out.text


async def test_the_redirect_keeps_the_apps_root_path(stored):
    app = Starlette(routes=dashboard_routes(lambda: stored, FixedReposAccess([])))
    transport = httpx.ASGITransport(app=app, root_path="/gate")
    async with httpx.AsyncClient(transport=transport, base_url="http://dash.test") as web:
        page = await web.get("/gate/dashboard")
    assert page.status_code == 303
    assert page.headers["location"] == "/gate/login?next=%2Fgate%2Fdashboard"


async def test_public_repositories_are_listed_signed_out_and_a_reader_of_none_is_not_sent(
        stored):
    async with dashboard(stored, FixedReposAccess([REPO])) as web:  # e.g. a public REPO
        public = await web.get("/dashboard")
        public_json = await web.get("/dashboard", headers=JSON)
    async with dashboard(stored, FixedReposAccess([], login="mona")) as web:
        none = await web.get("/dashboard")
        none_json = await web.get("/dashboard", headers=JSON)
    assert public.status_code == 200 and f">{REPO}</a>" in public.text
    assert '<a href="/login?next=/dashboard">Sign in with GitHub</a>' in public.text
    assert [r["repo"] for r in public_json.json()["repositories"]] == [REPO]
    assert none.status_code == 200 and "No repository you may read" in none.text
    assert SIGN_OUT in none.text
    assert (none_json.status_code, none_json.json()) == (200, {"repositories": []})


async def test_the_commit_link_uses_the_configured_github_web_root(stored):
    async with dashboard(stored, FixedReposAccess([REPO])) as web:
        default = await web.get(f"{BASE}/runs/{sha(1)}")
    async with dashboard(stored, FixedReposAccess([REPO]),
                         github_url="https://ghe.example.com/") as web:
        custom = await web.get(f"{BASE}/runs/{sha(1)}")
    assert f'href="https://github.com/{REPO}/commit/{sha(1)}"' in default.text
    assert f'href="https://ghe.example.com/{REPO}/commit/{sha(1)}"' in custom.text
    assert "https://github.com" not in custom.text
