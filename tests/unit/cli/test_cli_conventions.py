"""The command line behaves like the ones people know (issue 33), through `main`.

No option can be abbreviated (``--all`` was read as ``--allow-undecided``); every misuse is one
line on stderr and exit 2; every command takes ``-q/--quiet`` and ``-v/--verbose``; ``llmgate run
--dry-run`` prints the plan and the estimate and sends nothing (the fake provider counts the
calls; a command target would leave a marker file).
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import echo_repo
from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_GATE_FAILED, EXIT_PASS, _parser, main

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm

MARK = """import json, pathlib, sys
pathlib.Path(sys.argv[3]).write_text("ran")
example = json.load(open(sys.argv[1]))
json.dump({"output": example["input"]}, open(sys.argv[2], "w"))
"""


def commands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every parser below ``parser`` (commands and their actions), ``parser`` first."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += commands(child)
    return found


def misuse(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run ``llmgate ARGV``, which must exit 2 with one line on stderr; return that line."""
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    out, err = capsys.readouterr()
    assert (exc.value.code, out, err.count("\n")) == (EXIT_CONFIG_ERROR, "", 1), err
    return err


@pytest.fixture()
def plain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty git repository as the current folder (nothing of the caller's is run)."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_no_option_is_abbreviated(plain, capsys):
    assert misuse(capsys, "run", "--all") == "llmgate: unrecognized arguments: --all\n"
    assert misuse(capsys, "run", "--allow") == "llmgate: unrecognized arguments: --allow\n"
    assert misuse(capsys, "dataset", "check", "x.jsonl", "--qui").startswith(
        "llmgate: unrecognized arguments: --qui")
    assert all(not parser.allow_abbrev for parser in commands(_parser()))


def test_every_misuse_is_one_line_and_exit_2(plain, capsys):
    assert misuse(capsys, "nope").startswith("llmgate: argument COMMAND: invalid choice: 'nope'")
    assert misuse(capsys, "run", "--smoke", "x") == (
        "llmgate run: argument --smoke: must be a whole number of at least 1, got 'x'\n")
    assert misuse(capsys, "run", "-q", "-v") == (
        "llmgate run: argument -v/--verbose: not allowed with argument -q/--quiet\n")
    code = main(["run", "--compare-to", "release", "--base", "main"])  # was 3
    assert (code, capsys.readouterr().err) == (
        EXIT_CONFIG_ERROR, "llmgate: --compare-to and --base both name the base: give one\n")


def test_every_command_takes_quiet_and_verbose():
    leaves = [p for p in commands(_parser()) if not any(
        isinstance(a, argparse._SubParsersAction) for a in p._actions)]
    assert len(leaves) > 15
    for parser in leaves:
        assert {"-q", "--quiet", "-v", "--verbose"} <= set(parser._option_string_actions), \
            parser.prog


def test_quiet_prints_no_estimate_verbose_more(llm: FakeLLMServer, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(echo_repo(llm, tmp_path / "repo"))
    errs = {}
    for level in ("-q", "", "-v"):
        assert main(["run", "--no-cache", *([level] if level else [])]) == EXIT_PASS
        errs[level] = capsys.readouterr().err
    assert "estimate in the working tree: 2 provider calls" in errs[""]
    assert errs["-q"] == ""
    assert errs[""] in errs["-v"] and len(errs["-v"]) > len(errs[""])


def test_dry_run_prints_the_plan_and_sends_nothing(llm: FakeLLMServer, tmp_path, monkeypatch,
                                                   capsys):
    repo = echo_repo(llm, tmp_path / "repo")
    marker = tmp_path / "marker"
    config = (repo / ".llmgate.yml").read_text().replace("test-model", "gpt-4o-mini") + (
        "  - name: cmd\n    dataset: evals/d.jsonl\n"
        f"    target: {{command: 'python3 mark.py {{input_file}} {{output_file}} {marker}'}}\n")
    (repo / ".llmgate.yml").write_text(config)
    (repo / "mark.py").write_text(MARK)
    monkeypatch.chdir(repo)
    monkeypatch.setenv("LLMGATE_SANDBOX_WRITE_PATHS", str(tmp_path))  # the marker's folder
    assert main(["run", "--dry-run", "--no-cache"]) == EXIT_PASS
    out, _ = capsys.readouterr()
    assert llm.calls() == [] and not marker.exists()
    assert "head suite s: 2 calls" in out
    assert "head suite cmd: a command target (no provider call)" in out
    assert "total: 2 provider calls (0 cached), $0.00" in out  # priced: gpt-4o-mini
    assert main(["run", "--no-cache", "--format", "json"]) == EXIT_PASS  # the same run, for real
    assert len(llm.calls()) == 2 and marker.read_text() == "ran"


def test_dry_run_prints_its_plan_as_json(llm: FakeLLMServer, tmp_path, monkeypatch, capsys):
    """``--format json`` prints the dry run's plan as JSON (it printed the text plan), to
    stdout or to its path; a format it cannot write is a misuse (2), not a silent text plan."""
    repo = echo_repo(llm, tmp_path / "repo")
    monkeypatch.chdir(repo)
    assert main(["run", "--dry-run", "--no-cache", "--format", "json"]) == EXIT_PASS
    out, _ = capsys.readouterr()
    plan = json.loads(out)
    assert (plan["dry_run"], plan["calls"], plan["cached_calls"], plan["config_error"]) == \
        (True, 2, 0, None)
    [config] = plan["configs"]
    [head] = config["sides"]
    assert (config["path"], head["side"], head["sha"], head["suites"], head["refused"]) == \
        (".llmgate.yml", "head", None, [{"name": "s", "calls": 2}], [])
    assert main(["run", "--dry-run", "--no-cache", "--format", f"json:{tmp_path / 'p.json'}"]) \
        == EXIT_PASS
    assert json.loads((tmp_path / "p.json").read_text())["calls"] == 2
    assert main(["run", "--dry-run", "--format", "junit"]) == EXIT_CONFIG_ERROR
    assert "--dry-run writes no junit report" in capsys.readouterr().err
    assert llm.calls() == []


def test_dry_run_names_a_key_the_run_would_refuse(llm: FakeLLMServer, tmp_path, monkeypatch,
                                                  capsys):
    """An ``api_key_env`` the worker does not have: every call would be refused, so the dry run
    says so and exits 2 on the target's line, as a run with ``--base`` does (it printed an
    estimate and exited 0; a run without ``--base`` fails, 1, with every call refused)."""
    repo = echo_repo(llm, tmp_path / "repo")
    config = (repo / ".llmgate.yml").read_text().replace(llm_support.KEY_ENV, "NO_SUCH_KEY_X")
    (repo / ".llmgate.yml").write_text(config)
    monkeypatch.delenv("NO_SUCH_KEY_X", raising=False)
    monkeypatch.chdir(repo)
    assert main(["run", "--dry-run", "--no-cache"]) == EXIT_CONFIG_ERROR
    out, err = capsys.readouterr()
    assert "head refused: the target: the worker has no NO_SUCH_KEY_X" in out
    assert "configuration error: .llmgate.yml:6: the target: the worker has no NO_SUCH_KEY_X" \
        in err  # the target's line
    assert main(["run", "--no-cache"]) == EXIT_GATE_FAILED  # the run: head's calls all refused
    assert llm.calls() == []
