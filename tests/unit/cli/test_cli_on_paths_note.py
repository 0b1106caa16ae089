"""``llmgate run --base`` skips suites by ``on_paths`` as the App does (issue 33).

A suite with ``on_paths`` that no changed file matches is skipped on the App. ``llmgate run``
ran it all the same and only noted so (issue 30); with ``--base`` it now takes the changed files
as the App does (the diff from the merge base of ``--base`` and head to head; for the working
tree, its uncommitted and untracked files too) and says which suites it skipped. ``--all-suites``
runs every suite, and the note says then, as without ``--base``, that ``on_paths`` is not
applied. Through ``llmgate run`` on a real git repository.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.worker_support import commit, git
from worker.cli.main import EXIT_PASS, main

CONFIG = """version: 1
suites:
  - name: prompted
    dataset: evals/echo.jsonl
    on_paths: ["prompts/**"]
    target:
      command: python3 t.py {input_file} {output_file}
    assertions:
      - type: equals
    gate: {pass_rate: {min: 0.5}}
  - name: always
    dataset: evals/echo.jsonl
    target:
      command: python3 t.py {input_file} {output_file}
    assertions:
      - type: equals
    gate: {pass_rate: {min: 0.5}}
"""
ECHO = """import json, sys
example = json.load(open(sys.argv[1]))
json.dump({"output": example["input"]}, open(sys.argv[2], "w"))
"""
NOTE = ("on_paths not applied: no changed files are known (llmgate run without --base or with "
        "--all-suites, and a push, gate every suite; a pull request's changed files decide on "
        "the App)")
SKIPPED = ("suite prompted skipped: the changed file (README.md) matches none of its on_paths "
           "(prompts/**)")


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A repository whose ``docs`` branch changes only README.md; (its path, docs's SHA)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "main", {".llmgate.yml": CONFIG, "t.py": ECHO, "prompts/p.txt": "hi\n",
                          "evals/echo.jsonl": '{"id": "a", "input": "x", "expected": "x"}\n'})
    head = commit(repo, "docs", {"README.md": "only docs\n"})
    monkeypatch.chdir(repo)
    return repo, head


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict, set[str]]:
    """``llmgate run ARGS --format json``: (exit code, report, suites with outcomes)."""
    code = main(["run", *args, "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    return code, report, {o["suite"] for o in report["outcomes"]}


def test_base_skips_the_suites_no_changed_file_concerns(repo, capsys):
    code, report, suites = run(capsys, "--base", "main", "--head", repo[1])
    assert (code, report["conclusion"], suites) == (EXIT_PASS, "success", {"always"})
    assert SKIPPED in report["notes"]
    assert NOTE not in report["notes"]


def test_all_suites_runs_every_suite_and_notes_it(repo, capsys):
    code, report, suites = run(capsys, "--base", "main", "--head", repo[1], "--all-suites")
    assert (code, suites) == (EXIT_PASS, {"prompted", "always"})
    assert NOTE in report["notes"] and SKIPPED not in report["notes"]


def test_without_base_every_suite_runs_and_the_note_says_so(repo, capsys):
    code, report, suites = run(capsys)
    assert (code, suites) == (EXIT_PASS, {"prompted", "always"})
    assert NOTE in report["notes"]


def test_the_working_trees_uncommitted_files_are_changes(repo, capsys):
    root, _ = repo
    (root / "prompts" / "new.txt").write_text("untracked\n")  # not committed, not staged
    code, report, suites = run(capsys, "--base", "main")
    assert (code, suites) == (EXIT_PASS, {"prompted", "always"})
    assert not any("skipped" in note for note in report["notes"])
