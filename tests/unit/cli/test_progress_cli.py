"""The progress line of ``llmgate run``: through the real CLI, and its timing on a fake clock."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import echo_repo
from worker.cli import progress
from worker.cli.main import main
from worker.cli.progress import Progress
from worker.evals.context import CallEvent

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm


def chat(hit: int = 0, cost_usd: float = 0.01) -> CallEvent:
    return CallEvent("model", "m", 1 - hit, hit, cost_usd)


def test_in_ci_one_line_every_ten_seconds_with_the_eta():
    now, out = [0.0], io.StringIO()
    bar = Progress(out, clock=lambda: now[0], tty=False)
    bar.plan("1a2b3c4d5e", 40)
    for second in range(1, 21):  # one call a second, the fifth cached
        now[0] = float(second)
        bar.call(chat(hit=int(second == 5), cost_usd=0.0 if second == 5 else 0.01))
    assert out.getvalue().splitlines() == [
        "llmgate: 1a2b3c4: 10/40 calls (1 cached), $0.0900, 10 s, about 30 s left",
        "llmgate: 1a2b3c4: 20/40 calls (1 cached), $0.1900, 20 s, about 20 s left"]


def test_on_a_terminal_the_line_is_redrawn_and_ended():
    now, out = [0.0], io.StringIO()
    bar = Progress(out, clock=lambda: now[0], tty=True)
    bar.plan("", 0)
    now[0] = 1.0
    bar.call(CallEvent("command", "", 1, 0, 0.0))
    bar.finish()
    assert out.getvalue() == "\r\x1b[2Kllmgate: working tree: 0 calls (0 cached), 1 commands, " \
                             "$0.0000, 1 s\n"


def test_the_cli_prints_progress_per_side(llm: FakeLLMServer, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    repo = echo_repo(llm, tmp_path / "repo")
    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.0)  # every call, not every 10 s
    assert main(["run", "--repo", str(repo), "--no-cache"]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "/2 calls" in line]
    assert [line.split(", $")[0] for line in lines] == [
        "llmgate: working tree: 1/2 calls (0 cached)",
        "llmgate: working tree: 2/2 calls (0 cached)"]
