"""``llmgate history``: a baseline store's records as the dashboard's static pages.

Two commits of the tiny repository get their baselines stored by ``llmgate run --baseline-store``
(a directory, a git ref, Redis), then ``llmgate history`` writes the site: the pages exist, name
both commits and their pass rates, every link is relative and opens a file of the export, the
CSV has one row per commit and metric, and an earlier export is written again.
"""

from __future__ import annotations

import csv
import io
import json
import posixpath
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.unit.cli_support import tiny_clone, tiny_repo_template
from worker.cli.main import main

pytestmark = pytest.mark.slow  # git processes and the tiny repository's runs
tiny_template, tiny = tiny_repo_template, tiny_clone  # fixtures
REPO = "acme/echo-bot"


class Links(HTMLParser):
    """Every ``href`` of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hrefs += [v for k, v in attrs if k == "href" and v is not None]


def hrefs(page: Path) -> list[str]:
    parser = Links()
    parser.feed(page.read_text())
    return parser.hrefs


def store_two_commits(store: str, shas: dict[str, str],
                      capsys: pytest.CaptureFixture[str]) -> None:
    """Store main's baseline, then pr/drop's (each the base of a local gate)."""
    for base, head in (("main", "pr/docs"), ("pr/drop", "main")):
        code = main(["run", "--base", base, "--head", head, "--base-tip", "--all-suites",
                     "--baseline-store", store, "--format", "json"])
        capsys.readouterr()
        assert code in (0, 1), base


def history(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["history", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("kind", ["directory", "git", "redis"])
def test_the_site_shows_both_commits_with_relative_links(kind, tiny, tmp_path, capsys,
                                                         monkeypatch, request):
    repo, shas = tiny
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    monkeypatch.delenv("REDIS_URL", raising=False)
    store = {"directory": str(tmp_path / "store"), "git": "git", "redis": "redis"}[kind]
    if kind == "redis":
        monkeypatch.setenv("REDIS_URL", request.getfixturevalue("redis_url"))
    store_two_commits(store, shas, capsys)
    site = tmp_path / "site"
    code, out, err = history(capsys, "--store", store, "--out", str(site))
    assert (code, err) == (0, ""), err
    assert "1 repositories, 2 runs" in out

    home = site / REPO
    for path in ("index.html", f"{REPO}/index.html", f"{REPO}/index.json",
                 f"{REPO}/history.csv", f"{REPO}/runs/{shas['main']}.html",
                 f"{REPO}/runs/{shas['pr/drop']}.html"):
        assert (site / path).is_file(), path
    page = (home / "index.html").read_text()
    assert "2 default-branch runs" in page
    for sha in (shas["main"], shas["pr/drop"]):
        assert sha[:7] in page
    assert "Sign in" not in page and "no sign-in" in page
    run_page = (home / "runs" / f"{shas['pr/drop']}.html").read_text()
    assert "0.75" in run_page and shas["pr/drop"] in run_page

    pages = sorted(site.rglob("*.html"))
    assert len(pages) == 4
    for html_page in pages:
        for href in hrefs(html_page):
            if href.startswith(("https://github.com/", "data:")):  # commits; the icon
                continue
            assert not href.startswith(("/", "?")) and "://" not in href, (html_page, href)
            target = posixpath.normpath(posixpath.join(
                html_page.parent.relative_to(site).as_posix(), href))
            assert (site / target).is_file(), (html_page, href)
    repo_links = hrefs(home / "index.html")
    assert f"runs/{shas['main']}.html" in repo_links and "history.csv" in repo_links
    assert "../../index.html" in repo_links

    rows = list(csv.DictReader(io.StringIO((home / "history.csv").read_text())))
    rates = {(r["sha"], r["suite"]): float(r["value"]) for r in rows
             if r["metric"] == "pass_rate"}
    assert rates == {(shas["main"], "echo"): 1.0, (shas["pr/drop"], "echo"): 0.75}
    assert [r["sha"] for r in rows if r["metric"] == "pass_rate"] == [shas["main"],
                                                                      shas["pr/drop"]]
    data = json.loads((home / "index.json").read_text())
    assert [r["sha"] for r in data["branch_runs"]] == [shas["pr/drop"], shas["main"]]

    (site / "index.html").write_text("stale")
    assert history(capsys, "--store", store, "--out", str(site))[0] == 0  # an earlier export
    assert "Repositories" in (site / "index.html").read_text()


def test_a_folder_that_is_no_export_is_refused_unless_forced(tiny, tmp_path, capsys,
                                                            monkeypatch):
    repo, shas = tiny
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    store = str(tmp_path / "store")
    store_two_commits(store, shas, capsys)
    site = tmp_path / "site"
    site.mkdir()
    (site / "notes.txt").write_text("mine")
    code, out, err = history(capsys, "--store", store, "--out", str(site))
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "--force" in err
    assert not (site / "index.html").exists()
    assert history(capsys, "--store", store, "--out", str(site), "--force")[0] == 0
    assert (site / REPO / "index.html").is_file() and (site / "notes.txt").read_text() == "mine"
    assert history(capsys, "--store", store, "--out", str(site), "--force")[0] == 0


def test_an_empty_store_writes_an_index_saying_so(tmp_path, capsys):
    (tmp_path / "store").mkdir()
    code, _, err = history(capsys, "--store", str(tmp_path / "store"), "--out",
                           str(tmp_path / "site"))
    assert (code, err) == (0, "")
    assert "No repository" in (tmp_path / "site" / "index.html").read_text()


@pytest.mark.parametrize("store", ["missing", "git"])
def test_a_store_that_cannot_be_read_is_exit_2(store, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not a git repository
    code, out, err = history(capsys, "--store", str(tmp_path / store) if store != "git"
                             else "git", "--out", str(tmp_path / "site"))
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert not (tmp_path / "site").exists()


def test_local_records_are_shown_under_repo(tiny, tmp_path, capsys, monkeypatch):
    repo, shas = tiny
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    store = str(tmp_path / "store")
    store_two_commits(store, shas, capsys)
    code, out, _ = history(capsys, "--store", store, "--out", str(tmp_path / "site"),
                           "--repo", "me/bot")
    assert code == 0 and "2 runs" in out
    assert (tmp_path / "site" / "me" / "bot" / "runs" / f"{shas['main']}.html").is_file()
