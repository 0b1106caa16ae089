"""Every output a user sees is byte-identical to the golden files (issue 36's guard).

Issue 36 re-lays worker/ without changing behaviour. This test pins what users see on the
shipped example examples/support-bot (its build_repo.py gives the same SHAs on every machine):

- ``llmgate run`` with ``--base main`` against ``pr/regress`` (fails) and ``pr/fix`` (passes),
  every report format at once: ``json``, ``junit``, ``sarif``, ``html``, ``comment``,
  ``markdown`` (to files), ``github`` (workflow commands on stdout, the job summary appended to
  ``$GITHUB_STEP_SUMMARY``), and the plain-text ``terminal`` report, which the CLI prints when
  stdout is a terminal: the CLI runs as a child process on a pseudo-terminal, so its stdout
  holds the terminal report followed by the workflow commands;
- the App, in the scenario of ``llmgate demo``: pull request 1 of acme/support-bot opened at
  ``pr/regress``, then pushed to ``pr/fix``, gated by a real arq worker (this process, burst
  mode), real Redis, real git and the schema-checking fake GitHub: both check runs (conclusion,
  title, summary, text, annotations) and the sticky comment after each run;
- ``llmgate demo`` itself (marked ``slow``: 30-45 s, it starts every process), its stdout.

All run with ``LLMGATE_SANDBOX=off``: the Landlock sandbox would triple the time (92 command
starts a run), and a kernel without Landlock would add a note the golden files lack; with it
off, every machine gives the same reports, which carry the sandbox-off note. What
legitimately varies is replaced before comparing, each narrowly (`normalise`):

- the time commands took: JUnit's ``time="…"`` and JSON's ``latency_ms`` and
  ``latency_p50``/``p90``/``p99`` (milliseconds, measured, not computed);
- when the run happened: JUnit's ``timestamp`` and ``hostname``, and the minute a stored
  baseline was made, on the line that names it ("stored baseline from the base run of #1,
  <time> UTC", worker/baselines/reuse.py);
- the temporary directory the example is built in (``<tmp>``), should any output name it.

Nothing else is replaced: SHAs, scores, p-values (seeded), ordering and wording must match.

The golden files (tests/golden/outputs/) were made from a clean tree of the commit before the
re-layout; tests/golden/outputs/README.md says how, and how to regenerate them deliberately
(``LLMGATE_WRITE_GOLDEN=1`` writes them instead of comparing).
"""

from __future__ import annotations

import errno
import json
import os
import pty
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.unit import worker_support
from tests.unit.worker_support import gate_payload, run_jobs

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "outputs"
BUILD_REPO = ROOT / "examples" / "support-bot" / "build_repo.py"
#: Set to 1 to write the golden files from this tree instead of comparing (README.md there).
WRITE = os.environ.get("LLMGATE_WRITE_GOLDEN") == "1"
#: Pull request heads of the example and the exit code ``llmgate run`` gives each.
HEADS = {"regress": ("pr/regress", 1), "fix": ("pr/fix", 0)}
#: ``--format NAME:FILE`` of every report written to a file (``github`` takes no path).
FILES = {"json": "report.json", "junit": "report.xml", "sarif": "report.sarif",
         "html": "report.html", "comment": "comment.md", "markdown": "report.md"}
OWNER, REPO = "acme", "support-bot"

#: (pattern, replacement) for what varies between runs; see the module docstring.
_VARYING = (
    (re.compile(r'"(latency_(?:ms|p50|p90|p99))": [0-9.e+-]+'), r'"\1": <ms>'),
    (re.compile(r'\btime="[0-9.]+"'), 'time="<s>"'),
    (re.compile(r'\btimestamp="[^"]*"'), 'timestamp="<time>"'),
    (re.compile(r'\bhostname="[^"]*"'), 'hostname="<host>"'),
)
#: A line naming a stored baseline, and the minute it was stored (worker/baselines/reuse.py).
_STORED_LINE = re.compile(r"^.*stored baselines?\b.*$", re.MULTILINE)
_STORED_AT = re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d UTC\b")


def normalise(text: str, tmp: Path) -> str:
    """Return ``text`` with the varying parts (module docstring) replaced by placeholders."""
    text = text.replace(str(tmp), "<tmp>")
    for pattern, replacement in _VARYING:
        text = pattern.sub(replacement, text)
    return _STORED_LINE.sub(lambda line: _STORED_AT.sub("<time> UTC", line.group()), text)


def check(name: str, text: str) -> None:
    """Compare ``text`` with the golden file ``name`` byte for byte (or write it, `WRITE`)."""
    path = GOLDEN / name
    if WRITE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
        return
    assert path.exists(), f"{path} is missing: see {GOLDEN / 'README.md'}"
    golden = path.read_bytes().decode()
    assert text == golden, f"{name} differs from its golden file ({path})"


@pytest.fixture(scope="module")
def support_bot(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """examples/support-bot built into a git repository: (its path, branch -> SHA)."""
    repo = tmp_path_factory.mktemp("outputs") / "support-bot"
    done = subprocess.run([sys.executable, str(BUILD_REPO), str(repo)], capture_output=True,
                          text=True, check=True)
    shas: dict[str, str] = json.loads(done.stdout)
    return repo, shas


def _run_on_terminal(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, bytes]:
    """Run ``argv`` with stdout on a pseudo-terminal; return (exit code, stdout bytes).

    The terminal's ``\\r\\n`` line ends (the tty's ONLCR) are returned as ``\\n``."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=follower,
                            stderr=subprocess.DEVNULL)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError as err:  # EIO: the child closed the terminal
            if err.errno != errno.EIO:
                raise
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    code = proc.wait(timeout=120)
    return code, b"".join(chunks).replace(b"\r\n", b"\n")


github = worker_support.github  # fixture: the fake GitHub, the worker's environment on it


@pytest.mark.usefixtures("cli_runs")  # the CLI runs start now and overlap this test
async def test_the_apps_check_runs_and_sticky_comment(
        support_bot: tuple[Path, dict[str, str]], github: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    repo, shas = support_bot
    monkeypatch.setenv("LLMGATE_SANDBOX", "off")
    clone_url = repo.as_uri()
    comments = []
    for side in ("regress", "fix"):
        head_sha = shas[HEADS[side][0]]
        github.setup({"pulls": [{"owner": OWNER, "repo": REPO, "number": 1,
                                 "head_sha": head_sha, "base_sha": shas["main"],
                                 "base_ref": "main", "head_ref": "pr/regress",
                                 "clone_url": clone_url}]})
        await run_jobs([gate_payload(clone_url, head_sha, shas["main"], repo=REPO)])
        state = github.state()
        comments.append([c["body"] for c in state["comments"]])
    assert state["violations"] == []
    runs = state["check_runs"]
    assert [r["head_sha"] for r in runs] == [shas["pr/regress"], shas["pr/fix"]]
    root = repo.parent
    for side, run in zip(("regress", "fix"), runs, strict=True):
        output = run["output"]
        facts = {"name": run["name"], "status": run["status"],
                 "conclusion": run["conclusion"], "title": output["title"],
                 "annotations": run["annotations"]}
        check(f"app-{side}.check-run.json",
              normalise(json.dumps(facts, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                        root))
        check(f"app-{side}.check-summary.md", normalise(output["summary"], root))
        check(f"app-{side}.check-text.md", normalise(output.get("text") or "", root))
    for side, bodies in zip(("regress", "fix"), comments, strict=True):
        assert len(bodies) == 1, bodies  # one sticky comment, edited in place
        check(f"app-{side}.comment.md", normalise(bodies[0], root))


@dataclass(frozen=True)
class CliRun:
    """One ``llmgate run`` of `test_every_report_format_of_llmgate_run`.

    Attributes:
        code: its exit code.
        stdout: what it printed on the pseudo-terminal (``\r\n`` made ``\n``).
        out: the folder of its report files and the job summary.
        work: the temporary folder holding its repository (``<tmp>`` in the golden files).
    """

    code: int
    stdout: str
    out: Path
    work: Path


def _cli_run(work: Path, side: str) -> CliRun:
    """Build the example in ``work`` and run ``llmgate run`` on it against ``side``'s head,
    every format at once, stdout on a pseudo-terminal (module docstring)."""
    repo = work / "support-bot"
    subprocess.run([sys.executable, str(BUILD_REPO), str(repo)], capture_output=True,
                   check=True)
    out = work / "out"
    out.mkdir()
    (work / "home").mkdir()
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(work / "home"),
           "LANG": "C.UTF-8", "TZ": "UTC", "PYTHONPATH": str(ROOT),
           "LLMGATE_CACHE_DIR": str(work / "cache"), "LLMGATE_SANDBOX": "off",
           "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(out / "step-summary.md")}
    formats = [arg for name, file in FILES.items() for arg in ("--format", f"{name}:{out / file}")]
    code, stdout = _run_on_terminal(
        [sys.executable, "-m", "worker.cli", "run", "--base", "main", "--head", HEADS[side][0],
         *formats, "--format", "github"], repo, env)
    return CliRun(code, stdout.decode(), out, work)


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[CliRun]]]:
    """Both ``llmgate run`` processes, started at once in the background (each on its own
    copy of the example: two runs add worktrees to one repository at the same time otherwise),
    so they overlap each other and the App's test, which asks for them first."""
    with ThreadPoolExecutor(max_workers=len(HEADS)) as pool:
        yield {side: pool.submit(_cli_run, tmp_path_factory.mktemp(f"run-{side}"), side)
               for side in HEADS}


@pytest.mark.parametrize("side", sorted(HEADS))
def test_every_report_format_of_llmgate_run(cli_runs: dict[str, Future[CliRun]],
                                            side: str) -> None:
    run = cli_runs[side].result(timeout=300)
    assert run.code == HEADS[side][1], run.stdout[-3000:]
    check(f"run-{side}.terminal-and-github.txt", normalise(run.stdout, run.work))
    check(f"run-{side}.step-summary.md",
          normalise((run.out / "step-summary.md").read_text(), run.work))
    for file in FILES.values():
        check(f"run-{side}.{file}", normalise((run.out / file).read_text(), run.work))


@pytest.mark.slow
def test_llmgate_demo_prints_the_same(tmp_path: Path) -> None:
    """``llmgate demo`` as a user runs it (its own redis-server, fake GitHub, web process and
    worker, as processes), with ``LLMGATE_SANDBOX=off`` as above: the same text on stdout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LLMGATE_SANDBOX": "off", "TZ": "UTC",
           "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "worker.cli", "demo"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    check("demo.stdout.txt", normalise(done.stdout, tmp_path))
