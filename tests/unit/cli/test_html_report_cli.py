"""``llmgate run --format html`` in a real headless Chromium (Playwright driving the machine's
``chromium``): the page renders with no console error and no network request, the verdict,
rules, paired statistics, charts, the consistency suite's CAR curves of base and head and the
examples table are visible, and the search box filters the table.

The repository gates an echo suite (``bravo`` regresses at head) and a consistency suite whose
head answers by option position, not by text (its CAR curve drops).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.reports import PAGE_HEADERS
from tests.unit.worker_support import CONFIG, DATASET, ECHO, commit, git
from worker.cli.main import EXIT_GATE_FAILED, main

playwright = pytest.importorskip("playwright.sync_api")

#: The machine's Chromium (Debian's launcher script wraps this binary).
CHROMIUM = next((p for p in ("/usr/lib/chromium/chromium", shutil.which("chromium") or "",
                             shutil.which("chromium-browser") or "") if p and Path(p).is_file()),
                "")
QUIZ_BOT = """import json, sys
doc = json.load(open(sys.argv[1]))
options = doc["vars"]["options"]
right = [o["label"] for o in options if o["text"].startswith("right")][0]
ORDER_BLIND = True
label = right if ORDER_BLIND or doc["vars"]["variant"] == 0 else options[0]["label"]
json.dump({"output": "Answer: " + label}, open(sys.argv[2], "w"))
"""
QUIZ_SUITE = """  - name: quiz
    type: consistency
    dataset: q.csv
    target:
      command: python3 quiz.py {input_file} {output_file}
    consistency:
      perturbations: [{type: option_reorder, num_variants: 2}]
    gate:
      original_accuracy: {min: 0.5}
"""
#: An example whose input and output are markup: the page must show it as text.
EVIL = "<script>alert(1)</script><img src=x onerror=alert(2)>"
EVIL_ROW = json.dumps({"id": "evil", "input": EVIL, "expected": EVIL}) + "\n"
QUESTIONS = ("id,stem,option_a,option_b,option_c,correct\n"
             "q1,One?,right one,wrong,also wrong,A\n"
             "q2,Two?,nope,right two,never,B\n"
             "q3,Three?,no,not this,right three,C\n")


@pytest.fixture(scope="module")
def page_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Gate ``pr`` against ``main`` and return the HTML report written."""
    repo = tmp_path_factory.mktemp("html") / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    files: dict[str, str | None] = {
        ".llmgate.yml": CONFIG + QUIZ_SUITE, "echo.py": ECHO, "quiz.py": QUIZ_BOT,
        "evals/echo.jsonl": DATASET + EVIL_ROW, "q.csv": QUESTIONS}
    commit(repo, "main", files, "bots")
    commit(repo, "pr", {"echo.py": ECHO.replace('BROKEN = ""', 'BROKEN = "bravo"'),
                        "quiz.py": QUIZ_BOT.replace("ORDER_BLIND = True", "ORDER_BLIND = False")})
    out = repo.parent / "report.html"
    code = main(["run", "--repo", str(repo), "--no-cache", "--base", "main", "--head", "pr",
                 "--format", f"html:{out}", "--format", f"json:{repo.parent / 'r.json'}"])
    assert code == EXIT_GATE_FAILED
    return out


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM, reason="no chromium on this machine")
def test_the_html_report_renders_in_headless_chromium(page_file: Path, tmp_path: Path) -> None:
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            problems: list[str] = []
            page.on("console", lambda m: problems.append(f"{m.type}: {m.text}")
                    if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_file.as_uri())
            page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
            visible = {name: page.locator(selector).first.is_visible() for name, selector in {
                "verdict": "#verdict", "rules": "#rules", "statistics": "#statistics",
                "metric chart": "svg[aria-label='echo: base and head']",
                "score changes": "svg[aria-label='echo: score changes']",
                "CAR curve": "svg[aria-label='quiz: CAR curve']",
                "examples": "#examples"}.items()}
            verdict = page.locator("#verdict").inner_text()
            car = page.locator("svg[aria-label='quiz: CAR curve'] polyline")
            car_points = [car.nth(i).get_attribute("points") for i in range(car.count())]
            rows = page.locator("#examples tbody tr:visible").count()
            page.fill("#search", "bravo")
            found = page.locator("#examples tbody tr:visible").all_inner_texts()
            page.fill("#search", "")
            page.check("#changed")
            changed = page.locator("#examples tbody tr:visible").count()
        finally:
            browser.close()
    assert problems == []
    assert requests == [page_file.as_uri()]  # self-contained: nothing fetched
    assert all(visible.values()), visible
    assert "llmgate: fail" in verdict
    assert len(car_points) == 2 and car_points[0] != car_points[1]  # base and head differ
    assert rows == 5 + 3 * 3  # echo's examples, quiz's questions x (original + 2 variants)
    assert len(found) == 1 and "regressed" in found[0]
    assert 1 <= changed < rows
    assert (tmp_path / "report.png").stat().st_size > 10_000


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM, reason="no chromium on this machine")
def test_under_the_details_pages_policy_the_search_runs_and_nothing_is_refused(
        page_file: Path) -> None:
    """The App serves this page with app.reports.PAGE_HEADERS: its hash-allowed script must run
    and the browser must refuse nothing (a refusal is a console error)."""
    url = "http://llmgate.invalid/reports/" + "a" * 32
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            problems: list[str] = []
            page.on("console", lambda m: problems.append(f"{m.type}: {m.text}")
                    if m.type in ("error", "warning") else None)
            page.route("**/*", lambda route: route.fulfill(
                status=200, body=page_file.read_bytes(), headers={
                    **PAGE_HEADERS, "Content-Type": "text/html; charset=utf-8"}))
            page.goto(url)
            page.fill("#search", "bravo")
            shown = page.locator("#shown").inner_text()
        finally:
            browser.close()
    assert problems == []
    assert shown == "1"  # the script ran: the filter counted the one matching row


def test_markup_in_examples_is_shown_as_text_and_nothing_is_fetched(page_file: Path) -> None:
    text = page_file.read_text(encoding="utf-8")
    assert text.count("<script>") == 1  # the page's own; the example's is escaped
    shown = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;"
    assert text.count(shown) == 4  # input, expected, base and head outputs
    assert "<img" not in text
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in text
