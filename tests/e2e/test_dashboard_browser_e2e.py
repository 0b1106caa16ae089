"""The dashboard in a real headless Chromium (issue 35, "Done when", first bullet).

Real parts only: the session's redis-server, the fake GitHub over HTTP (its OAuth endpoints,
``/user`` and ``/user/installations/...``, checked against GitHub's rules and schemas), and the
web process as ``uvicorn app.main:app`` on a loopback port, configured from its environment
(client id and secret, ``LLMGATE_SESSION_SECRET``, ``GITHUB_URL``/``GITHUB_API_URL`` at the
fake, ``LLMGATE_PUBLIC_URL`` at itself, ``LLMGATE_REPORTS_REQUIRE_LOGIN`` on). Playwright drives
the machine's Chromium through: the dashboard signed out, sign-in at the fake GitHub, the
repositories list (the readable private repository only), a repository with 200 runs and its
judge's agreement with people charted over 2 gates, a chart point to its run, a pull request
gate to its stored report (worker/report/store.py, rendered by worker/report/html_report.py as
the worker does), an example's page with its base and head outputs side by side (recorded by
the gate, redacted: a GitHub token is not in the page, markup is shown as text), the 404s of a
repository the user cannot read (page, JSON and CSV the same as an unknown repository's),
sign-out by the nav's link (and the signed-out visitor sent to sign in).

Every page must log no console error (except the intended 404s) and fetch nothing from another
origin than the app (the fake GitHub's authorize redirect is the one other, by OAuth's design).
A screenshot of each page is kept in ``tmp_path/screenshots`` and, when ``LLMGATE_ARTEFACTS`` is
set, in that folder too.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from redis.asyncio import Redis

from app.dashboard.session import SESSION_COOKIE
from tests.conftest import free_port
from tests.fakes.fake_github import FakeGitHubServer, running_fake_github
from tests.unit.app.dashboard import support
from worker.baselines.store import BaselineSettings
from worker.baselines.timeline import Timeline, record_acceptance
from worker.evals.score.metrics import suite_metrics
from worker.evals.types import (
    AssertionResult,
    Conclusion,
    GateReport,
    JudgeAgreement,
    PairedComparison,
    RuleOutcome,
    RuleStatus,
    RunResult,
    SuiteResult,
)
from worker.github.checks import CheckOutput
from worker.history_contract import pr_run_id
from worker.pipeline.report_values import ConfigReport, MultiReport
from worker.report.html_report import render_html
from worker.report.store import ReportSettings, ReportStore
from worker.security.redact import REDACTED, Redactor

playwright = pytest.importorskip("playwright.sync_api",
                                 reason="playwright is not installed (pip install playwright)")

pytestmark = pytest.mark.slow

#: The machine's Chromium (Debian's launcher script wraps this binary).
CHROMIUM = next((p for p in ("/usr/lib/chromium/chromium", shutil.which("chromium") or "",
                             shutil.which("chromium-browser") or "") if p and Path(p).is_file()),
                "")
#: The readable private repository (200 runs, 2 gates), the one the user cannot read (history
#: too), and one nobody recorded.
REPO, HIDDEN, UNKNOWN = "acme/private-one", "acme/hidden", "acme/nothing-here"
CLIENT_ID, CLIENT_SECRET = "Iv23browser", "client-secret-browser"
USERS = {"mona": {"id": 4242, "installations": {"11": [REPO]}}}
REPOS = {REPO: {"private": True}, HIDDEN: {"private": True}}
#: The two pull request gates: (number, check run id, conclusion).
GATES: tuple[tuple[int, int, Conclusion], ...] = ((7, 555, "failure"), (8, 556, "success"))
#: Chromium's console line for a document answered 404 (the intended ones only).
NOT_FOUND_LINE = "the server responded with a status of 404"
#: The example the flow opens from PR #7's gate, which passed at base and fails at head there,
#: so the gate records both outputs (worker/baselines/gate_records.py `output_records`).
OPENED = "ex-002"
#: A GitHub token's shape (``ghp_`` and 36 characters), redacted by the shape alone
#: (worker/security/redact.py `SECRET_SHAPES`), and markup that would run if it became an
#: element (an alert is recorded as a dialog) and that the page can find by its id.
TOKEN = "ghp_" + "Z9y8X7w6V5" * 3 + "u4T3s2"
TAG = '<img id="llmgate-injected" src="x" onerror="alert(2)">'
#: The outputs of `OPENED` at base and head in PR #7: head's holds the token, the tag, a long
#: paragraph and a long unbroken word (a URL), to see how the page wraps them.
BASE_OUTPUT = ("Hello Ana,\nyour ticket #4521 is solved: the refund of 19.90 EUR was sent today "
               "and reaches your account within 3 working days.\nKind regards, Support")
HEAD_OUTPUT = ("Hello Ana,\n" + TAG + " your ticket #4521 is solved. Debug: using " + TOKEN
               + " for the refunds API.\n"
               + "The refund of 19.90 EUR was sent today. " * 12 + "\nDetails: https://support."
               "example.com/tickets/4521?" + "&".join(f"field{k}=value{k}" for k in range(20))
               + "\nKind regards, Support")
#: The judge's agreement with people measured by each gate (suite ``tickets``, criterion
#: `CRITERION`, base's labels, `JUDGE_REFERENCE` as reference, `JUDGE_LABELS` labels):
#: pull request number -> (agreement 0-1, Cohen's kappa, rule status).
CRITERION, JUDGE_REFERENCE, JUDGE_LABELS = "tone", 0.9, 20
JUDGES: dict[int, tuple[float, float, RuleStatus]] = {7: (0.6, 0.21, "fail"),
                                                      8: (0.95, 0.89, "pass")}


@dataclass
class Stack:
    """The running parts: the app's root URL, the fake GitHub, the stored reports' paths and
    the web process's log."""

    app_url: str
    gh: FakeGitHubServer
    log: Path
    reports: dict[int, str] = field(default_factory=dict)


def _with_output(suite: SuiteResult, example_id: str, passed: bool, output: str) -> SuiteResult:
    """Return ``suite`` with example ``example_id`` passing or not with ``output`` (its
    ``equals`` check following), and the suite's metrics computed again."""
    examples = tuple(replace(e, passed=passed, output=output, assertions=(
        AssertionResult("equals", passed, 1.0 if passed else 0.0), *e.assertions[1:]))
        if e.id == example_id else e for e in suite.examples)
    return replace(suite, examples=examples, metrics=suite_metrics(examples))


def gate_report(pr: int, conclusion: Conclusion) -> GateReport:
    """Return pull request ``pr``'s gate of suite ``tickets`` (branch run 1's results against
    run 0's): ``pass_rate`` dropped 0.10 past ``max_drop 0.05``; the changed judge of
    `CRITERION` was run on base's labels (`JUDGES`: its ``min_agreement 0.80`` outcome and
    measured figures, as worker/pipeline/judge_trust.py writes them); in PR #7, `OPENED`
    passed at base with `BASE_OUTPUT` and fails at head with `HEAD_OUTPUT` (not redacted:
    the history's own redaction is under test)."""
    base, head = support.suite("tickets", 0), support.suite("tickets", 1)
    if pr == 7:
        base = _with_output(base, OPENED, True, BASE_OUTPUT)
        head = _with_output(head, OPENED, False, HEAD_OUTPUT)
    agreement, kappa, status = JUDGES[pr]
    outcomes = (
        RuleOutcome("tickets", "pass_rate", "max_drop 0.05", base.metrics["pass_rate"],
                    head.metrics["pass_rate"], -0.1, "fail", "dropped 0.10"),
        RuleOutcome("tickets", f"judge agreement ({CRITERION})", "min_agreement 0.80",
                    JUDGE_REFERENCE, agreement, agreement - JUDGE_REFERENCE, status,
                    f"agreement {agreement:.0%} against at least 80%"))
    compared = PairedComparison("tickets", "pass_rate", "", 12, 0, 0, 0.75, 0.65, -0.10, -0.2,
                                -0.01, "mcnemar", 0.01, 0.02, 0, 2, 10, 0.1, 0.05)
    measured = JudgeAgreement("tickets", CRITERION, "openai/judge-new", "evals/labels.jsonl",
                              agreement, JUDGE_REFERENCE, kappa, JUDGE_LABELS)
    return GateReport(conclusion, outcomes, (), RunResult("h" * 40, {"tickets": head}),
                      RunResult("b" * 40, {"tickets": base}), comparisons=(compared,),
                      base_source="compared with bbbbbbb", base_sha="b" * 40,
                      judge_agreement=(measured,))


async def write_history(redis_url: str, app_url: str) -> dict[int, str]:
    """Write `REPO`'s 200 default-branch runs and its 2 pull request gates (`gate_report`:
    both with the judge's agreement, PR #7 with `OPENED`'s outputs), each gate recorded with
    the reports' redaction (worker/gate/history_record.py) and with a stored report of `REPO`
    at ``app_url`` rendered from the redacted report (as worker/gate/run.py publishes it),
    and `HIDDEN`'s history (support.write_history); return each gate's report path by pull
    request number."""
    redis = Redis.from_url(redis_url)
    try:
        timeline = Timeline(redis, BaselineSettings(history_runs=500, history_pr_days=90),
                            lambda: support.NOW)
        for i in range(support.RUNS):
            run = RunResult(support.sha(i), {s.name: s for s in (
                support.suite("tickets", i), support.suite(support.ODD_SUITE, i))})
            await timeline.push(repo=REPO, namespace=REPO, sha=support.sha(i), branch="main",
                                pushed_at=support.T0 + 3600 * i, run=run, base_source="",
                                duration_s=10 + i)
        store = ReportStore(redis, ReportSettings(app_url, 3600))
        redactor = Redactor()
        paths: dict[int, str] = {}
        for pr, check_run_id, conclusion in GATES:
            report = gate_report(pr, conclusion)
            multi = MultiReport((ConfigReport(".llmgate.yml", "", report),))
            page = render_html(redactor.redact_value(multi), "h" * 40, "b" * 40)
            url = await store.store(CheckOutput(f"llmgate: PR #{pr}", "summary", "text"),
                                    functools.partial(str, page), REPO)
            paths[pr] = urlsplit(url).path
            await timeline.gate(repo=REPO, pr_number=pr, check_run_id=check_run_id,
                                head_sha="h" * 40, base_sha="b" * 40, base_ref="main",
                                configs=[("", report)], conclusion=conclusion, why=support.WHY,
                                report_url=url, duration_s=3.25, redact=redactor.redact)
        await record_acceptance(redis, repo=REPO, pr_number=7, check_run_id=555,
                                by="maintainer", at=support.NOW + 60)
        await support.write_history(redis, repo=HIDDEN, runs=5)
        return paths
    finally:
        await redis.aclose()


def web_env(app_url: str, gh: FakeGitHubServer, redis_url: str) -> dict[str, str]:
    """The web process's environment: the test's, with sign-in configured at the fake."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LLMGATE_", "GITHUB_")) or k == "LLMGATE_CACHE_DIR"}
    return env | {
        "GITHUB_WEBHOOK_SECRET": "w" * 32, "REDIS_URL": redis_url,
        "LLMGATE_GITHUB_CLIENT_ID": CLIENT_ID, "LLMGATE_GITHUB_CLIENT_SECRET": CLIENT_SECRET,
        "LLMGATE_SESSION_SECRET": "s" * 40, "GITHUB_URL": gh.url, "GITHUB_API_URL": gh.url,
        "LLMGATE_PUBLIC_URL": app_url, "LLMGATE_REPORTS_REQUIRE_LOGIN": "true"}


@pytest.fixture(scope="module")
def stack(redis_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Start the fake GitHub and ``uvicorn app.main:app``; write the history; yield them."""
    if not CHROMIUM:
        pytest.skip("no chromium on this machine (apt-get install chromium)")
    redis_url = redis_server + "/3"  # a database of its own: other tests flush /0
    port = free_port()
    app_url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("web") / "web.log"
    with running_fake_github() as gh, log.open("wb") as out:
        gh.setup({"reset_config": True, "oauth": {
            "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
            "callback_url": f"{app_url}/auth/callback", "authorize_as": "mona",
            "users": USERS, "repos": REPOS}})
        import redis as sync_redis

        flusher = sync_redis.Redis.from_url(redis_url)
        flusher.flushdb()
        reports = asyncio.run(write_history(redis_url, app_url))
        web = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "app.main:app", "--host", "127.0.0.1", "--port",
             str(port), "--log-level", "warning"], env=web_env(app_url, gh, redis_url),
            cwd=Path(__file__).resolve().parents[2], stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_healthy(web, app_url, log)
            yield Stack(app_url, gh, log, reports)
        finally:
            web.terminate()
            web.wait(timeout=30)
            flusher.flushdb()
            flusher.close()


def _wait_healthy(web: subprocess.Popen[bytes], app_url: str, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if web.poll() is not None:
            raise RuntimeError(f"the web process exited with {web.returncode}: "
                               f"{log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"{app_url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError("the web process did not answer /healthz within 60 s")


class Browser:
    """One Chromium page with its console, page errors, dialogs and requests recorded per
    step, and a screenshot of each page (``shots``; copied to ``LLMGATE_ARTEFACTS``)."""

    def __init__(self, page: Any, shots: Path) -> None:
        self.page, self.shots = page, shots
        self.step = "start"
        self.console: list[tuple[str, str]] = []
        self.requests: list[str] = []
        self.saved: list[Path] = []
        page.on("console", lambda m: self.console.append((self.step, f"{m.type}: {m.text}"))
                if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: self.console.append((self.step, f"page error: {e}")))
        page.on("dialog", self._dialog)
        page.on("request", lambda r: self.requests.append(r.url))

    def _dialog(self, dialog: Any) -> None:
        """Record a dialog (an alert would mean a page ran script) and dismiss it."""
        self.console.append((self.step, f"dialog: {dialog.message}"))
        dialog.dismiss()

    def shot(self, name: str) -> None:
        """Save a full-page screenshot of the page as ``<n>-<name>.png``."""
        self.step = name
        path = self.shots / f"{len(self.saved) + 1:02d}-{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        self.saved.append(path)
        artefacts = os.environ.get("LLMGATE_ARTEFACTS")
        if artefacts:
            target = Path(artefacts) / "dashboard-browser"
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target / path.name)

    def problems(self, allowed_404_steps: set[str]) -> list[tuple[str, str]]:
        """Return the console lines, page errors and dialogs not allowed: a 404's console
        line is allowed on the steps that open an intended 404 only."""
        return [(step, line) for step, line in self.console
                if not (step in allowed_404_steps and NOT_FOUND_LINE in line)]


@pytest.fixture()
def browser(stack: Stack, tmp_path: Path) -> Iterator[Browser]:
    """A fresh Chromium context (no cookies) and its recorded page."""
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with playwright.sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = chromium.new_context(viewport={"width": 1280, "height": 900})
            yield Browser(context.new_page(), shots)
        finally:
            chromium.close()


def fetch(page: Any, url: str, accept: str) -> tuple[int, str]:
    """GET ``url`` with the page's cookies (Playwright's request context) and ``accept``."""
    answer = page.context.request.get(url, headers={"Accept": accept})
    return answer.status, answer.text()


def test_sign_in_browse_a_repository_its_report_and_examples_then_sign_out(
        stack: Stack, browser: Browser) -> None:
    """The whole flow of issue 35's first "Done when" bullet, in one browser context."""
    app, page = stack.app_url, browser.page
    expected_404: set[str] = set()

    # Signed out, where sign-out lands: the dashboard lists nothing (there is no public
    # repository to show) and offers sign-in.
    browser.step = "signed-out"
    first = page.goto(f"{app}/dashboard?signed_out=1")
    assert first is not None and first.status == 200
    assert "No repository you may read" in page.content()
    assert REPO not in page.content()
    assert page.get_by_role("link", name="Sign in with GitHub").count() == 1
    browser.shot("dashboard-signed-out")

    # Sign in: /dashboard (signed out, nothing readable) -> /login -> the fake GitHub's
    # authorize (consents at once) -> /auth/callback -> /dashboard.
    browser.step = "sign-in"
    page.goto(f"{app}/dashboard")
    page.wait_for_url(f"{app}/dashboard")
    assert "mona · Sign out" in page.locator("nav").inner_text()
    session = [c for c in page.context.cookies() if c["name"] == SESSION_COOKIE]
    assert len(session) == 1, page.context.cookies()  # Chromium keeps a Secure cookie of http://127.0.0.1
    assert session[0]["secure"] and session[0]["httpOnly"] and session[0]["sameSite"] == "Lax"
    assert session[0]["path"] == "/" and session[0]["domain"] == "127.0.0.1"
    old_cookie = session[0]

    # The repositories: the readable one only.
    repos_html = page.content()
    assert REPO in repos_html and HIDDEN not in repos_html
    assert page.locator("h2 a").all_inner_texts() == [REPO]
    browser.shot("repositories")

    # A repository with 200 runs.
    page.get_by_role("link", name=REPO, exact=True).first.click()
    page.wait_for_url(f"{app}/dashboard/{REPO}")
    assert "200 default-branch runs and 2 pull request gates kept." in \
        page.locator("body").inner_text().replace("\n", " ")
    judge_label = f"tickets · {CRITERION}: agreement with people"
    charts = page.locator(f'div.chart svg:not([aria-label="{judge_label}"])')
    assert charts.count() >= 2
    points = charts.locator("a")
    assert points.count() >= 100  # 100 runs charted by default, each point a link
    # The judge's agreement with people: one chart, a point per gate that measured it (oldest
    # first), each linking to its gate with kappa and n in its tooltip; the table's latest.
    judge = page.locator(f'div.chart svg[aria-label="{judge_label}"]')
    assert judge.count() == 1 and judge.is_visible()
    drawn = judge.bounding_box()
    assert drawn is not None and drawn["width"] > 300 and drawn["height"] > 50
    dots = judge.locator("a")
    assert dots.count() == len(JUDGES)
    assert all(d.is_visible() for d in dots.all())
    tips = [d.locator("title").text_content() or "" for d in dots.all()]
    assert [t.split(" · ")[0] for t in tips] == ["#7: 0.6", "#8: 0.95"], tips
    assert "kappa 0.21 · n 20 · reference 90% · fail" in tips[0]
    assert [d.get_attribute("href") for d in dots.all()] == [
        f"/dashboard/{REPO}/runs/{pr_run_id(pr, check_run_id)}" for pr, check_run_id, _ in GATES]
    judges_table = page.locator("h2", has_text="Judge agreement with people").locator(
        "xpath=following-sibling::table[1]")
    assert judges_table.locator("tr").nth(1).locator("td").all_inner_texts()[:5] == [
        "tickets", CRITERION, "0.95", "0.89", "20"]
    assert "No gate calibrated a judge" not in page.content()
    browser.shot("repository")

    # A chart point (the newest run) to its run page.
    newest = points.last
    target = newest.get_attribute("href")
    assert target is not None and "/runs/" in target
    newest.click()
    page.wait_for_url(f"{app}{target}")
    assert page.locator("h1").inner_text().startswith("Push to main at")
    assert support.sha(support.RUNS - 1)[:7] in page.locator("h1").inner_text()
    browser.shot("branch-run")

    # A pull request gate to its stored report.
    page.get_by_role("link", name=REPO, exact=True).first.click()
    page.wait_for_url(f"{app}/dashboard/{REPO}")
    page.get_by_role("link", name="#7", exact=True).first.click()
    page.wait_for_url(f"{app}/dashboard/{REPO}/runs/**")
    assert "Pull request #7" in page.locator("h1").inner_text()
    assert "Accepted by maintainer" in page.locator("body").inner_text()
    browser.shot("pull-request-run")
    page.get_by_role("link", name="full report").click()
    page.wait_for_url(f"{app}{stack.reports[7]}")
    assert "llmgate: fail" in page.locator("#verdict").inner_text()
    browser.shot("report")

    # An example's page, from the gate's examples.
    page.go_back()
    page.wait_for_url(f"{app}/dashboard/{REPO}/runs/**")
    page.locator("details summary").first.click()
    example = page.locator("details a", has_text=OPENED).first
    example.click()
    page.wait_for_url(f"{app}/dashboard/{REPO}/examples/**")
    assert page.locator("h1").inner_text().startswith(OPENED)
    assert "Passed on the default branch" in page.locator("body").inner_text()
    # PR #7's outputs, base and head side by side in one row: the tag shown as text (no
    # element made of it), the token redacted (nowhere in the page), nothing wider than the
    # window.
    row = page.locator("table.outputs tr", has=page.locator("td.head pre"))
    assert row.count() == 1
    assert row.locator("td").first.inner_text().startswith("#7")
    assert row.locator("td").nth(1).inner_text() == "regressed"
    base_pre, head_pre = row.locator("td.base pre"), row.locator("td.head pre")
    assert base_pre.inner_text() == BASE_OUTPUT
    head_text = head_pre.inner_text()
    assert TAG in head_text and f"Debug: using {REDACTED} for the refunds API." in head_text
    assert head_text == Redactor().redact(HEAD_OUTPUT)
    left, right = base_pre.bounding_box(), head_pre.bounding_box()
    assert left is not None and right is not None
    assert left["x"] + left["width"] <= right["x"]  # base left of head
    assert left["y"] < right["y"] + right["height"] and right["y"] < left["y"] + left["height"]
    assert page.locator("#llmgate-injected").count() == 0
    assert page.locator("table.outputs img").count() == 0
    html = page.content()
    assert TOKEN not in html and TOKEN[:20] not in html
    assert page.evaluate("document.documentElement.scrollWidth") <= \
        page.evaluate("document.documentElement.clientWidth")
    browser.shot("example")

    # The example whose id is markup: shown as text, nothing runs (a dialog would be recorded).
    page.goto(f"{app}/dashboard/{REPO}")
    page.locator("a", has_text=support.SCRIPT_ID).first.click()
    page.wait_for_url(f"{app}/dashboard/{REPO}/examples/**")
    assert page.locator("h1").inner_text().startswith(support.SCRIPT_ID)
    browser.shot("example-markup")

    # The repository the user cannot read: the 404 of a repository nobody recorded.
    for name, repo in (("hidden-repository", HIDDEN), ("unknown-repository", UNKNOWN)):
        browser.step = name
        expected_404.add(name)
        answer = page.goto(f"{app}/dashboard/{repo}")
        assert answer is not None and answer.status == 404
        browser.shot(name)
    hidden = {kind: fetch(page, f"{app}/dashboard/{HIDDEN}{suffix}", accept)
              for kind, suffix, accept in (("page", "", "text/html"),
                                           ("json", "", "application/json"),
                                           ("csv", "/history.csv", "text/csv"),
                                           ("run", f"/runs/{support.sha(0)}", "text/html"))}
    unknown = {kind: fetch(page, f"{app}/dashboard/{UNKNOWN}{suffix}", accept)
               for kind, suffix, accept in (("page", "", "text/html"),
                                            ("json", "", "application/json"),
                                            ("csv", "/history.csv", "text/csv"),
                                            ("run", f"/runs/{support.sha(0)}", "text/html"))}
    assert all(status == 404 for status, _ in hidden.values()), hidden
    assert hidden == unknown
    assert hidden["json"][1] == '{"error":"not found"}'
    readable_json = fetch(page, f"{app}/dashboard/{REPO}", "application/json")
    readable_csv = fetch(page, f"{app}/dashboard/{REPO}/history.csv", "text/csv")
    assert readable_json[0] == 200 and readable_json[1].startswith("{")
    assert readable_csv[0] == 200 and len(readable_csv[1].splitlines()) > support.RUNS

    # Sign out, by the nav's link: the repository, its data and its report are no longer
    # readable.
    browser.step = "sign-out"
    page.goto(f"{app}/dashboard/{REPO}")
    page.get_by_role("link", name="Sign out").click()
    page.wait_for_url(f"{app}/dashboard?signed_out=1")
    assert not [c for c in page.context.cookies() if c["name"] == SESSION_COOKIE]
    assert REPO not in page.content() and "You are signed out." in page.content()
    browser.shot("signed-out-again")
    browser.step = "after-sign-out"
    expected_404.add("after-sign-out")
    gone = page.goto(f"{app}/dashboard/{REPO}")
    assert gone is not None and gone.status == 404
    unknown_signed_out = fetch(page, f"{app}/dashboard/{UNKNOWN}", "text/html")
    assert gone.text() == unknown_signed_out[1].replace(UNKNOWN, REPO)  # but the sign-in link
    assert "Sign in with GitHub" in gone.text()
    browser.shot("repository-after-sign-out")
    assert fetch(page, f"{app}/dashboard/{REPO}", "application/json") == unknown["json"]
    report = page.context.request.get(f"{app}{stack.reports[7]}", max_redirects=0)
    assert report.status == 303 and report.headers["location"].startswith("/login?next=")
    # The signed-out cookie, replayed, is refused too (the session ended in the process).
    page.context.add_cookies([old_cookie])
    assert fetch(page, f"{app}/dashboard/{REPO}", "application/json") == unknown["json"]

    # Nothing else went wrong, and nothing was fetched from another origin.
    assert browser.problems(expected_404) == []
    gh_origin = stack.gh.url.rstrip("/")
    others = [u for u in browser.requests
              if not u.startswith(app + "/") and not u.startswith("data:")
              and not u.startswith(f"{gh_origin}/login/oauth/authorize?")]
    assert others == []
    assert sum(u.startswith(f"{gh_origin}/") for u in browser.requests) == 1  # authorize, once
    for shot in browser.saved:
        assert shot.is_file() and shot.stat().st_size > 0, shot
    assert len(browser.saved) == 12
    state = stack.gh.state()
    assert state["violations"] == []
    assert "Traceback" not in stack.log.read_text(errors="replace")


def test_the_signed_out_dashboard_leads_to_sign_in(stack: Stack, browser: Browser) -> None:
    """A signed-out visitor of /dashboard is sent to sign in (JSON: 401); every page's nav
    offers "Sign in with GitHub" back to itself, or "<login> · Sign out"; sign-out lands on
    a page that does not sign in again."""
    app, page = stack.app_url, browser.page
    request = page.context.request
    sent = request.get(f"{app}/dashboard", max_redirects=0)
    assert sent.status == 303 and sent.headers["location"] == "/login?next=%2Fdashboard"
    data = request.get(f"{app}/dashboard", headers={"Accept": "application/json"},
                       max_redirects=0)
    assert data.status == 401 and data.json() == {"error": "sign in"}

    # The 404 of a repository: the nav's sign-in comes back to it.
    browser.step = "not-found-signed-out"
    missing = page.goto(f"{app}/dashboard/{HIDDEN}")
    assert missing is not None and missing.status == 404
    sign_in = page.get_by_role("link", name="Sign in with GitHub")
    assert sign_in.get_attribute("href") == f"/login?next=/dashboard/{HIDDEN}"
    browser.shot("not-found-signed-out")

    # Where sign-out lands: the nav's link signs in and comes back to /dashboard.
    browser.step = "sign-in-link"
    page.goto(f"{app}/dashboard?signed_out=1")
    sign_in = page.get_by_role("link", name="Sign in with GitHub")
    assert sign_in.get_attribute("href") == "/login?next=/dashboard"
    sign_in.click()
    page.wait_for_url(f"{app}/dashboard")
    assert "mona · Sign out" in page.locator("nav").inner_text()
    assert page.locator("h2 a").all_inner_texts() == [REPO]
    browser.shot("signed-in-by-link")

    # The nav's sign-out ends the session and stays signed out.
    browser.step = "sign-out-link"
    page.goto(f"{app}/dashboard/{REPO}/runs/{support.sha(0)}")
    page.get_by_role("link", name="Sign out").click()
    page.wait_for_url(f"{app}/dashboard?signed_out=1")
    assert not [c for c in page.context.cookies() if c["name"] == SESSION_COOKIE]
    assert "You are signed out." in page.content() and REPO not in page.content()
    assert page.get_by_role("link", name="Sign out").count() == 0
    browser.shot("signed-out-by-link")
    assert browser.problems({"not-found-signed-out"}) == []
