"""The progress lines of ``llmgate run``: through the real CLI, and their timing and layout on a
fake clock and stream, with two sides progressing at once."""

from __future__ import annotations

import io
import re
import subprocess
from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import echo_repo
from tests.unit.worker_support import git
from worker.cli import progress
from worker.cli.main import main
from worker.cli.progress import Progress
from worker.evals.context import CallEvent, RunPlan

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm


def chat(side: str = "", suite: str = "s", hit: int = 0, cost_usd: float = 0.01) -> CallEvent:
    return CallEvent("model", "m", 1 - hit, hit, cost_usd, side, suite)


def test_in_ci_one_line_every_ten_seconds_with_the_eta() -> None:
    now, out = [0.0], io.StringIO()
    bar = Progress(out, clock=lambda: now[0], tty=False)
    bar.plan(RunPlan("1a2b3c4d5e", 40, (("s", 40),), "head"))
    for second in range(1, 21):  # one call a second, the fifth cached
        now[0] = float(second)
        bar.call(chat("head", hit=int(second == 5), cost_usd=0.0 if second == 5 else 0.01))
    assert out.getvalue().splitlines() == [
        "llmgate: head 1a2b3c4 s: 10/40 calls (1 cached), $0.0900, 10 s, about 30 s left",
        "llmgate: head 1a2b3c4 s: 20/40 calls (1 cached), $0.1900, 20 s, about 20 s left"]


def test_two_sides_at_once_get_a_line_per_suite_and_side_in_ci() -> None:
    now, out = [0.0], io.StringIO()
    bar = Progress(out, clock=lambda: now[0], tty=False)
    bar.plan(RunPlan("b" * 40, 4, (("a", 2), ("b", 2)), "base"))
    bar.plan(RunPlan("", 2, (("a", 2),), "head"))
    for second, event in enumerate([chat("base", "a"), chat("head", "a", hit=1),
                                    chat("base", "a"), chat("head", "a"),
                                    chat("base", "b")], 1):
        now[0] = 10.0 * second  # every call is due: each batch is the lines that moved
        bar.call(event)
    assert out.getvalue().splitlines() == [
        "llmgate: base bbbbbbb a: 1/2 calls (0 cached), $0.0100, 10 s, about 10 s left",
        "llmgate: head working tree a: 1/2 calls (1 cached), $0.0100, 20 s, about 20 s left",
        "llmgate: base bbbbbbb a: 2/2 calls (0 cached), $0.0200, 30 s, done",
        "llmgate: head working tree a: 2/2 calls (1 cached), $0.0200, 40 s, done",
        # suite b's time starts at base's call before its first (a's last, at 30 s)
        "llmgate: base bbbbbbb b: 1/2 calls (0 cached), $0.0100, 20 s, about 20 s left"]


def test_a_finished_suites_time_stops_and_a_terminal_line_fits_its_width() -> None:
    # field case (fresh-user tester): `40/40 calls ..., 5 s, done` went on to 6, 7, 8 s; and
    # 96-character lines on an 80-column terminal wrapped, so each redraw left stale rows
    now, out = [0.0], io.StringIO()
    bar = Progress(out, clock=lambda: now[0], tty=True, columns=60)
    bar.plan(RunPlan("b" * 40, 1, (("a-rather-long-suite-name", 1),), "base"))
    now[0] = 5.0
    bar.call(chat("base", "a-rather-long-suite-name"))
    now[0] = 9.0
    bar.finish()
    drawn = re.sub(r"\x1b\[\d*[FK]|\r", "", out.getvalue()).split("\n")[:-1]
    assert drawn == ["llmgate: base bbbbbbb a-rather-long-suite-name: 1/1 calls …"] * 2
    assert all(len(line) <= 59 for line in drawn)
    line = bar.counts.lines()[0]
    assert (line.elapsed_s(9.0), line.text(9.0).split(", ")[-2:]) == (5.0, ["5 s", "done"])


def test_on_a_terminal_the_block_of_lines_is_redrawn_in_place() -> None:
    now, out = [0.0], io.StringIO()
    bar = Progress(out, clock=lambda: now[0], tty=True, columns=120)
    bar.plan(RunPlan("b" * 40, 2, (("s", 2),), "base"))
    bar.plan(RunPlan("", 0, (("s", 0),), "head"))
    now[0] = 1.0
    bar.call(chat("base"))
    now[0] = 2.0
    bar.call(CallEvent("command", "", 1, 0, 0.0, "head", "s"))
    bar.finish()
    first = ("\r\x1b[2Kllmgate: base bbbbbbb s: 1/2 calls (0 cached), $0.0100, 1 s, "
             "about 1 s left\n"
             "\r\x1b[2Kllmgate: head working tree s: 0 calls (0 cached), $0.0000, 1 s\n")
    second = ("\x1b[2F\r\x1b[2Kllmgate: base bbbbbbb s: 1/2 calls (0 cached), $0.0100, 2 s, "
              "about 2 s left\n"
              "\r\x1b[2Kllmgate: head working tree s: 0 calls (0 cached), 1 commands, "
              "$0.0000, 2 s\n")
    assert out.getvalue() == first + second + second  # the last redraw: finish


def test_the_cli_prints_progress_per_suite_and_side(llm: FakeLLMServer, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    repo = echo_repo(llm, tmp_path / "repo")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    base_sha = git(repo, "rev-parse", "HEAD")
    (repo / "prompts" / "p.txt").write_text("The customer says: {{ input }}")  # head differs
    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.0)  # every call, not every 10 s
    assert main(["run", "--repo", str(repo), "--no-cache", "--base", base_sha]) == 0
    lines = [line.split(", $")[0] for line in capsys.readouterr().err.splitlines()
             if "/2 calls" in line]
    base = [line for line in lines if line.startswith(f"llmgate: base {base_sha[:7]} s: ")]
    head = [line for line in lines if line.startswith("llmgate: head working tree s: ")]
    assert sorted(base + head) == sorted(lines)  # a whole line each, of one side
    assert [re.sub(r".*: ", "", line) for line in base] == ["1/2 calls (0 cached)",
                                                            "2/2 calls (0 cached)"]
    assert [re.sub(r".*: ", "", line) for line in head] == ["1/2 calls (0 cached)",
                                                            "2/2 calls (0 cached)"]
    assert subprocess.run(["git", "-C", str(repo), "status", "--short"], capture_output=True,
                          text=True, check=True).stdout.strip() == "M prompts/p.txt"


def test_in_ci_a_log_that_printed_ends_with_the_final_counts() -> None:
    """Field case (tester, issue 15): a run's log ended at "61 commands" though all 120 ran:
    the last lines printed were those of the last 10-second mark."""
    now, out = [0.0], io.StringIO()
    bar = Progress(out, clock=lambda: now[0], tty=False)
    bar.plan(RunPlan("1a2b3c4d5e", 12, (("s", 12),), "head"))
    for second in range(1, 13):
        now[0] = float(second)
        bar.call(chat("head"))
    bar.finish()
    assert out.getvalue().splitlines() == [
        "llmgate: head 1a2b3c4 s: 10/12 calls (0 cached), $0.1000, 10 s, about 2 s left",
        "llmgate: head 1a2b3c4 s: 12/12 calls (0 cached), $0.1200, 12 s, done"]
    quiet = io.StringIO()
    short = Progress(quiet, clock=lambda: 1.0, tty=False)
    short.plan(RunPlan("1a2b3c4d5e", 1, (("s", 1),), "head"))
    short.call(chat("head"))
    short.finish()
    assert quiet.getvalue() == ""  # a run too short to print stays silent
