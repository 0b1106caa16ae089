"""``llmgate history``'s work: a baseline store's records as the dashboard's static pages.

A stored baseline (worker/baselines/store.py `Baseline`) is one suite's result at one commit.
`branch_runs` groups a store's records into the default branch's runs as the worker records
them (worker/baselines/timeline.py: one run per commit, its id the commit SHA, its suites at
side ``base`` built by worker/baselines/timeline_records.py), and `write_site` renders them with
the dashboard's own templates (app/dashboard/templates/) into a folder of files:

    <out>/index.html                      the repositories
    <out>/<owner>/<repo>/index.html       a repository: trends, cost, flapping examples
    <out>/<owner>/<repo>/index.json       the repository page's data (the JSON answer)
    <out>/<owner>/<repo>/history.csv      one row per run x suite x metric (`model.CSV_COLUMNS`)
    <out>/<owner>/<repo>/runs/<sha>.html  one run with its examples

The templates link by the live app's paths (``/dashboard/<owner>/<repo>/runs/<id>``); each
page's links are rewritten relative to the page (`relative_links`), so the folder works from
any path (GitHub Pages under ``/<repo>/``, a file:// URL). A link with no file in the export
(an example's page, ``?runs=``, sign-in) becomes its text. There is no sign-in: whoever can
read the folder reads every page of it.
"""

from __future__ import annotations

import csv
import html
import io
import posixpath
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from app.dashboard import (
    CHART_RUNS,
    FLAP_RUNS,
    GITHUB_URL,
    NAME,
    SPARK_RUNS,
    RepositoryPage,
    RepoSummary,
    environment,
    model,
    shape_page,
    shape_summary,
)
from worker.baselines import Baseline, example_rows, scoped_suite, suite_record
from worker.history_contract import (
    HISTORY_VERSION,
    ExampleRows,
    RunRecord,
    dumps,
    example_field,
)

#: The file that marks a folder as an earlier export (`write_site` writes it).
MARKER = ".llmgate-history"
#: Where the templates' links point in the live app (rendered with root "").
_LIVE = "/dashboard"
_ANCHOR = re.compile(r'<a href="([^"]*)"([^>]*)>(.*?)</a>', re.DOTALL)
_WHO = re.compile(r'<span class="who">.*?</span></nav>', re.DOTALL)
_STATIC_WHO = ('<span class="who muted">a static export of llmgate history: no sign-in'
               '</span></nav>')


def display_repo(namespace: str, rename: str | None) -> tuple[str, str] | None:
    """Return (``owner/name``, folder) of a record's namespace (``repo`` or ``repo/<folder>``,
    worker/pipeline/plan.py `baseline_namespace`), or None when it cannot be a page's path.

    Records kept under ``local`` (no ``GITHUB_REPOSITORY``) are shown as ``rename`` (default
    ``local/repository``); ``rename`` also names a store's one GitHub repository otherwise.
    """
    parts = namespace.split("/")
    if parts[0] == "local":
        owner_name, folder = (rename or "local/repository"), "/".join(parts[1:])
    elif len(parts) >= 2:
        owner_name, folder = "/".join(parts[:2]), "/".join(parts[2:])
    else:
        return None
    owner, _, name = owner_name.partition("/")
    if not all(NAME.fullmatch(p) and p not in (".", "..") for p in (owner, name)):
        return None
    return owner_name, folder


def branch_runs(records: Iterable[Baseline], branch: str | None,
                rename: str | None = None) -> dict[str, list[RunRecord]]:
    """Return ``owner/name`` -> its default branch's runs, newest first, from stored records.

    A record counts when it is a push to ``branch`` (any branch when None) or a pull request's
    base run (the commit a pull request was compared with: ``llmgate run --base``). A run is
    one commit: its suites (side ``base``, from every config's folder) with their examples,
    each suite's newest record when a commit holds several (an older key); ``order_s`` is the
    commit's first record's ``created_at``, ``created_at`` its last. Records whose namespace
    is no repository path (`display_repo`) are left out.
    """
    chosen: dict[tuple[str, str], dict[str, Baseline]] = {}
    for record in records:
        if record.origin == "push" and branch is not None and record.branch != branch:
            continue
        shown = display_repo(record.repo, rename)
        if shown is None:
            continue
        repo, folder = shown
        suites = chosen.setdefault((repo, record.sha), {})
        name = scoped_suite(folder, record.result.name)
        if name not in suites or suites[name].created_at < record.created_at:
            suites[name] = record
    out: dict[str, list[RunRecord]] = {}
    for (repo, sha), suites in chosen.items():
        stamps = [b.created_at for b in suites.values()]
        pushed = next((b.branch for b in suites.values() if b.branch),
                      branch or "the default branch")
        ordered = sorted(suites.items())
        records_ = [suite_record(name, "base", b.result) for name, b in ordered]
        examples: dict[str, ExampleRows] = {example_field("base", name): example_rows(b.result)
                                            for name, b in ordered}
        run: dict[str, Any] = {
            "v": HISTORY_VERSION, "kind": "branch", "repo": repo, "run_id": sha, "sha": sha,
            "base_sha": "", "branch": pushed, "pr_number": 0, "created_at": max(stamps),
            "order_s": min(stamps), "conclusion": "stored", "why": "",
            "base_source": "From the baseline store.", "report_url": "", "report_id": "",
            "check_run_id": 0, "suites": records_, "duration_s": 0.0, "accepted": None,
            "examples": examples}
        out.setdefault(repo, []).append(run)  # type: ignore[arg-type]  # RunRecord's keys
    for runs in out.values():
        runs.sort(key=lambda r: (-r["order_s"], r["sha"]))
    return dict(sorted(out.items()))


# --- the repository page's shapes, as app/dashboard/repository.py makes them from Redis -------

def _page_runs(run: RunRecord) -> RunRecord:
    """The run without its examples (as `list_branch_runs` returns it)."""
    return {k: v for k, v in run.items() if k != "examples"}  # type: ignore[return-value]


def repository_page(repo: str, runs: Sequence[RunRecord]) -> RepositoryPage:
    """Return ``repo``'s page from its branch ``runs`` (newest first, with examples) as the
    live app shapes it (`shape_page`): the newest `CHART_RUNS` charted (``pass_rate``, or each
    suite's first metric: a store holds no pull request gate), flapping examples over the
    newest `FLAP_RUNS`, every run listed in the JSON."""
    shown = [_page_runs(r) for r in runs[:CHART_RUNS]]
    return shape_page(repo, f"{_LIVE}/{repo}", shown, [], (len(runs), 0),
                      [r.get("examples", {}) for r in runs[:FLAP_RUNS]], runs_shown=CHART_RUNS,
                      every=False, listed=[_page_runs(r) for r in runs])


def repo_summary(repo: str, runs: Sequence[RunRecord]) -> RepoSummary:
    """Return ``repo``'s line on the repositories page as the live app shapes it
    (`shape_summary`: its headline metrics' sparklines over the newest `SPARK_RUNS` runs)."""
    shown = [_page_runs(r) for r in runs[:SPARK_RUNS]]
    return shape_summary(repo, shown[0]["created_at"] if shown else 0.0, shown, [])


# --- rendering --------------------------------------------------------------------------------

def site_path(live: str, runs: dict[str, dict[str, str]]) -> str | None:
    """Return the export's file (relative to its root) of a live dashboard path, or None.

    ``runs``: ``owner/name`` -> run id -> the run page's file name.
    """
    if live == _LIVE:
        return "index.html"
    if not live.startswith(_LIVE + "/"):
        return None
    parts = live[len(_LIVE) + 1:].split("/")
    repo = "/".join(parts[:2])
    if len(parts) < 2 or repo not in runs:
        return None
    if len(parts) == 2:
        return f"{repo}/index.html"
    if parts[2:] == ["history.csv"]:
        return f"{repo}/history.csv"
    if len(parts) == 4 and parts[2] == "runs":
        name = runs[repo].get(unquote(parts[3]))
        return None if name is None else f"{repo}/runs/{name}"
    return None


def relative_links(text: str, page: str, runs: dict[str, dict[str, str]]) -> str:
    """Return the rendered ``text`` of the export's file ``page`` with every link to a
    dashboard path made relative to ``page`` (`site_path`), every other link to this origin
    (``/...``, ``?...``) replaced by its text, and the nav's sign-in replaced by a note."""
    here = posixpath.dirname(page) or "."

    def link(found: re.Match[str]) -> str:
        href, rest, inner = html.unescape(found[1]), found[2], found[3]
        if href.startswith(("https://", "http://")):
            return found[0]
        target = site_path(href.partition("?")[0], runs) if "?" not in href else None
        if target is None:
            return inner
        return f'<a href="{html.escape(posixpath.relpath(target, here))}"{rest}>{inner}</a>'

    return _ANCHOR.sub(link, _WHO.sub(_STATIC_WHO, text, count=1))


def run_file(run: RunRecord) -> str:
    """A run page's file name: ``<sha>.html``."""
    return f"{re.sub(r'[^A-Za-z0-9_-]', '_', run['sha'])}.html"


def csv_text(runs: Sequence[RunRecord]) -> str:
    """The history CSV of branch ``runs`` (newest first), as the live app serves it."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(model.CSV_COLUMNS)
    writer.writerows(model.csv_rows(runs))
    return out.getvalue()


def write_site(out: Path, history: dict[str, list[RunRecord]],
               github_url: str = GITHUB_URL) -> list[Path]:
    """Write the export of ``history`` (``owner/name`` -> branch runs, newest first) into
    ``out`` (created; files already there are overwritten, others kept) and the `MARKER`;
    return the files written. Commits link to ``github_url``.

    Raises:
        OSError: a file cannot be written.
    """
    env = environment()
    names = {repo: {r["run_id"]: run_file(r) for r in runs} for repo, runs in history.items()}
    files: dict[str, str] = {}

    def render(template: str, path: str, **context: Any) -> None:
        text = env.get_template(template).render(root="", here="", signed_in=None, **context)
        files[path] = relative_links(text, path, names)

    render("index.html.j2", "index.html", signed_out=False,
           repos=[repo_summary(repo, runs) for repo, runs in history.items()])
    for repo, runs in history.items():
        page = repository_page(repo, runs)
        render("repository.html.j2", f"{repo}/index.html", page=page)
        files[f"{repo}/index.json"] = dumps(page.data)
        files[f"{repo}/history.csv"] = csv_text(runs)
        for run in runs:
            render("run.html.j2", f"{repo}/runs/{names[repo][run['run_id']]}", repo=repo,
                   run=run, totals=model.totals(run), base=page.base, github_url=github_url)
    files[MARKER] = "A static export of `llmgate history`; written again by it.\n"
    written = []
    for relative, text in files.items():
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="")
        written.append(path)
    return written

