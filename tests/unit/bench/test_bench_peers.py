"""bench/peers: reading each tool's output, the ratios of the table, recorded peer figures, and
the process-tree measurement (CPU of a process that outlives its command is counted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.peers import __main__ as peers_main
from bench.peers import jobs, parse, table, tools
from bench.peers.tree import TreeRun, label, pre_exec_fork

ROOT = Path(__file__).resolve().parents[3]

# What llmgate 0.1.0 printed for a gate of 20 tickets (the report's "Model calls" lines).
LLMGATE_REPORT = """### ✅ llmgate: pass

**Model calls:**
- Model calls at head: 20 provider calls, 0 cache hits, 140 tokens in (0 cached by the provider), 160 out, \\$0.0005 spent
- Estimated before the run at head: 20 calls (0 cached), \\~320 tokens in, \\~5120 out, \\$0.0106
- Model calls at base: 12 provider calls, 8 cache hits, 120 tokens in (0 cached by the provider), 140 out, \\$0.0004 spent
"""  # noqa: E501
# What llmci 0.4.1 printed (stdout) for a run.
LLMCI_REPORT = """Running 1 eval(s)...
## llmci Eval Report

| Eval | Metric | Score | Threshold | Status |
|------|--------|-------|-----------|--------|
| tickets | accuracy | 0.950 | ≥ 0.9 | ✅ |
"""
# promptfoo 0.121.20's closing lines, colours included.
PROMPTFOO_OUTPUT = ("\x1b[32m✓\x1b[39m Eval complete (ID: eval-X7Z)\n\nResults:\n"
                    "  \x1b[32m✓ 200 passed\x1b[39m (100%)\n  \x1b[31m0 failed\x1b[39m (0%)\n"
                    "  0 errors (0%)\nDuration: 9s (concurrency: 10)\n")


def _run(wall: float, cpu: float = 1.0, rss: int = 100_000_000, outlived: int = 0) -> TreeRun:
    return TreeRun(0, wall, cpu, cpu, rss, 1, outlived, 0.0, 0, (("x", 1),))


def test_llmgate_calls_and_cache_hits_per_side() -> None:
    assert parse.llmgate_calls(LLMGATE_REPORT) == {"head": (20, 0), "base": (12, 8)}
    assert parse.whole_job("llmgate", LLMGATE_REPORT, 20, 2) is None
    assert parse.whole_job("llmgate", LLMGATE_REPORT, 20, 1) is None
    assert "expected 21 per side" in parse.whole_job("llmgate", LLMGATE_REPORT, 21, 2)
    assert parse.whole_job("llmgate", "### ❌ llmgate: configuration error", 20, 1)


def test_llmci_report_table_scores_and_a_partial_run_is_refused() -> None:
    assert parse.llmci_scores(LLMCI_REPORT) == {("tickets", "accuracy"): 0.95}
    assert parse.whole_job("llmci", LLMCI_REPORT, 200, 1) == "llmci accuracy 0.95, expected 1.000"
    assert parse.whole_job("llmci", LLMCI_REPORT.replace("0.950", "1.000"), 200, 1) is None


def test_promptfoo_summary_without_colours() -> None:
    assert parse.promptfoo_summary(PROMPTFOO_OUTPUT) == {
        "passed": 200, "failed": 0, "errors": 0, "concurrency": 10}
    assert parse.whole_job("promptfoo", PROMPTFOO_OUTPUT, 200, 1) is None
    one_error = PROMPTFOO_OUTPUT.replace("200 passed", "199 passed").replace("0 errors", "1 error")
    assert "expected 200 passed" in parse.whole_job("promptfoo", one_error, 200, 1)


def test_ratio_of_medians_with_the_range_of_paired_repetitions() -> None:
    ours, theirs = [9.0, 10.0, 12.0], [8.0, 10.0, 8.0]
    assert table.ratio(ours, theirs) == "1.25 [1.00–1.50]"  # 10 / 8; 10/10 .. 12/8
    assert table.ratio(ours, [5.0]) == "2.00"  # a recorded median: no range
    assert table.ratio(ours, []) == "–"


def test_a_gate_of_two_commands_adds_walls_and_cpu_and_keeps_the_highest_memory() -> None:
    both = table.combine([_run(3.0, 1.5, 200, 1), _run(4.0, 2.0, 300)])
    assert (both.wall_s, both.cpu_s, both.peak_rss_bytes, both.outlived) == (7.0, 3.5, 300, 1)
    assert both.labels == (("x", 2),)


def test_issue_table_rows_and_floors() -> None:
    figs = {name: table.figures([_run(w, c, r)], [_run(w / 2)], [_run(2 * w)])
            for name, w, c, r in (("llmgate", 9.0, 6.0, 700_000_000),
                                  ("llmci", 9.0, 3.0, 200_000_000),
                                  ("promptfoo", 7.5, 2.0, 210_000_000))}
    lines = table.issue_table(figs, ["llmci", "promptfoo"], 2.0, 4.0, 400)
    assert lines[0] == ("| row | llmgate ÷ llmci | llmgate ÷ promptfoo | "
                        "÷ floor (llmgate / llmci / promptfoo) |")
    assert lines[2] == "| one side, cold, wall | 1.00 | 1.20 | 4.5 / 4.5 / 3.8 |"
    assert lines[3] == "| CPU (whole process tree) | 2.00 (6.0 vs 3.0 s) | 3.00 (6.0 vs 2.0 s) |  |"
    assert lines[4].startswith("| memory (whole tree, peak of summed RSS) | 3.50 (700 vs 200 MB)")
    assert lines[6] == "| base + head gate (400 calls), wall | 1.00 | 1.20 | 4.5 / 4.5 / 3.8 |"


def test_recorded_figures_round_trip(tmp_path: Path) -> None:
    figs = table.figures([_run(9.0), _run(11.0)], [_run(3.0)], [_run(20.0)])
    recorded = table.Recorded("a machine", "2026-12-01", "load 1.0", {"examples": 200},
                              {"llmci": {**table.medians(figs), "version": "llmci 0.4.1"}})
    path = tmp_path / "recorded.json"
    table.save_recorded(recorded, path)
    again = table.load_recorded(path)
    assert again == recorded
    found = table.recorded_figures(again, "llmci")
    assert found is not None and found["cold_wall_s"] == [10.0] and found["gate_wall_s"] == [20.0]
    assert table.recorded_figures(again, "promptfoo") is None
    assert table.load_recorded(tmp_path / "none.json") is None


def test_the_committed_record_names_machine_date_and_both_peers() -> None:
    recorded = table.load_recorded()
    assert recorded is not None and recorded.machine and recorded.date
    assert set(recorded.tools) == {"llmci", "promptfoo"}
    for figures in recorded.tools.values():
        assert {"cold_wall_s", "cpu_s", "peak_rss_mb", "warm_wall_s", "gate_wall_s"} <= set(figures)


@pytest.mark.parametrize("cmdline, expected", [
    (["/venv/bin/python3", "/venv/bin/llmgate", "run"], "llmgate"),
    (["/venv/bin/python3", "-m", "tests.fakes.fake_llm", "--port", "0"], "tests.fakes.fake_llm"),
    (["node", "/x/promptfoo/dist/src/entrypoint.js", "eval"], "entrypoint.js"),
    (["/usr/bin/git", "worktree", "add"], "git"),
    (["python3", "-c", "pass"], "python3"),
    ([], "?"),
])
def test_process_labels(cmdline: list[str], expected: str) -> None:
    assert label(cmdline) == expected


def test_a_child_between_fork_and_exec_is_not_counted_again() -> None:
    llmgate = ("/venv/bin/python3", "/venv/bin/llmgate", "run")
    seen = {10: (1, 340_000_000, llmgate), 11: (10, 340_000_000, llmgate),
            12: (10, 9_000_000, ("git", "status")), 13: (99, 5_000_000, llmgate)}
    assert pre_exec_fork(*seen[11][::2], seen)  # its parent's command line: not exec'd yet
    assert not pre_exec_fork(*seen[12][::2], seen)  # exec'd git
    assert not pre_exec_fork(*seen[10][::2], seen)  # the command itself
    assert not pre_exec_fork(*seen[13][::2], seen)  # its parent is not in the tree


# A command that starts a child and exits at once; the child then burns 0.5 s of CPU holding
# 60 MB: it outlives the command, and its CPU belongs to the command's tree.
ORPHAN = """
import subprocess, sys
subprocess.Popen([sys.executable, "-c", '''
import time
time.sleep(0.3)
block = b"x" * 60_000_000
start = time.process_time()
while time.process_time() - start < 0.5:
    pass
'''])
"""
MEASURE = """
import json, sys, tempfile
from dataclasses import asdict
from pathlib import Path
from bench.peers import tree
if sys.argv[1] == "subreaper":
    assert tree.become_subreaper()
with tempfile.TemporaryFile() as log:
    run = tree.measure([sys.executable, "-c", sys.argv[2]], cwd=Path.cwd(), env={}, log=log)
print(json.dumps(asdict(run)))
"""


def _measure_orphan(mode: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", MEASURE, mode, ORPHAN], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


@pytest.mark.slow
def test_cpu_and_memory_of_a_process_that_outlives_its_command_are_counted() -> None:
    run = _measure_orphan("subreaper")
    assert run["exit_code"] == 0 and run["outlived"] == 1 and run["killed"] == 0
    assert run["cpu_s"] >= 0.5  # the orphan's busy loop, reaped by the bench
    assert run["linger_s"] >= 0.5
    assert run["peak_rss_bytes"] >= 60_000_000
    assert run["processes"] == 2


@pytest.mark.slow
def test_without_the_subreaper_the_orphans_cpu_is_lost() -> None:
    """The reason the bench is a subreaper: an orphan adopted by another process is neither
    seen outliving the command nor is its CPU counted."""
    run = _measure_orphan("plain")
    assert run["outlived"] == 0
    assert run["cpu_s"] < 0.5


def _tool(name: str, tmp_path: Path) -> tools.Tool:
    command = tools.Invocation((name, "run"), tmp_path, {})
    return tools.Tool(name, f"{name} 1.0", tmp_path, command, (command,), lambda: None)


def test_without_peers_the_report_compares_with_the_recorded_figures_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded = table.Recorded("the bench machine", "2026-12-02", "load 2.0", {"examples": 200}, {
        peer: {"cold_wall_s": wall, "cpu_s": 4.0, "peak_rss_mb": 200.0, "warm_wall_s": 4.0,
               "gate_wall_s": 2 * wall, "version": f"{peer} 9"}
        for peer, wall in (("llmci", 12.0), ("promptfoo", 10.0))})
    monkeypatch.setattr(table, "RECORDED", tmp_path / "recorded.json")
    table.save_recorded(recorded)
    every = [_tool("llmgate", tmp_path)]
    bench = peers_main.Bench(peers_main.Fake("http://127.0.0.1:1/v1"),
                             jobs.Job("http://127.0.0.1:1/v1", 200, 10), tmp_path)
    bench.runs = {"llmgate": {"cold": [_run(8.0, 6.0), _run(9.0, 8.0)], "warm": [_run(2.0)] * 2,
                              "gate": [_run(12.0)] * 2, "--version": [_run(0.5)] * 2,
                              "--help": [_run(0.4)] * 2}}
    args = peers_main._args(["--without-peers"])
    args.load_at_start = 1.0

    peers_main.report(bench, every, args, started=0.0)

    out = capsys.readouterr().out
    assert ("- promptfoo: not run (--without-peers); compared with its figures recorded on "
            "2026-12-02 on the bench machine, load 2.0") in out
    assert "| one side, cold, wall | 0.71 | 0.85 | 4.2 / 6.0 / 5.0 |" in out  # 8.5 / 12, / 10
    assert "| CPU (whole process tree) | 1.75 (7.0 vs 4.0 s) | 1.75 (7.0 vs 4.0 s) |  |" in out
    assert "| llmci (r) |" in out and "| promptfoo (r) |" in out
    assert "llmgate --version 0.500 s, --help 0.400 s" in out
    assert out.splitlines()[-1] == "peers_cold_wall_vs_promptfoo=0.850"


def test_record_keeps_each_measured_peers_medians_with_machine_date_and_load(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(table, "RECORDED", tmp_path / "recorded.json")
    figs = {"llmci": table.figures([_run(9.0), _run(11.0)], [_run(3.0)] * 2, [_run(20.0)] * 2)}
    args = peers_main._args(["--latency-ms", "50"])
    args.load_at_start = 3.25

    peers_main.save_record(figs, [_tool("llmci", tmp_path)], jobs.Job("u", 100, 5), args, 2)

    recorded = table.load_recorded()
    assert recorded is not None and recorded.date and "usable cores" in recorded.machine
    assert recorded.load.startswith("1-minute load average 3.2 at the start, ")
    assert recorded.job == {"examples": 100, "concurrency": 5, "latency_ms": 50.0,
                            "repetitions": 2}
    assert recorded.tools["llmci"]["cold_wall_s"] == 10.0
    assert recorded.tools["llmci"]["version"] == "llmci 1.0"
