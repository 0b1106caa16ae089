"""A dataset inside a git submodule is named as such, with the fix (issue 31), through
``llmgate run`` on a real repository whose submodule is a second local repository."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.unit.worker_support import git
from worker.cli.main import EXIT_CONFIG_ERROR, main

MESSAGE = ("suite s: dataset data/d.jsonl: this path is inside the git submodule `data`, and "
           "llmgate does not check out submodules (their fetch credentials must never reach "
           "the targets it runs), so the file is not there: commit the data to this repository "
           "itself (outside `data`) and point the config at it")


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "data-repo"
    data.mkdir()
    git(data, "init", "-q", "-b", "main")
    (data / "d.jsonl").write_text('{"id": "a", "input": "hi", "expected": "hi"}\n')
    git(data, "add", "d.jsonl")
    git(data, "commit", "-q", "-m", "data")
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    python = shlex.quote(sys.executable)
    (root / "echo.py").write_text("import json, sys\nexample = json.load(open(sys.argv[1]))\n"
                                  'json.dump({"output": example["input"]}, '
                                  'open(sys.argv[2], "w"))\n')
    (root / ".llmgate.yml").write_text(f"""version: 1
suites:
  - name: s
    dataset: data/d.jsonl
    target: {{command: "{python} echo.py {{input_file}} {{output_file}}"}}
    assertions: [{{type: equals}}]
""")
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(data), "data")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "suite on a submodule")
    assert git(root, "ls-tree", "HEAD", "data").startswith("160000 commit ")
    monkeypatch.chdir(root)
    return root


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict, str]:
    code = main(["run", "--format", "json", *args])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_a_dataset_in_a_checked_out_submodule_is_named_as_such(repo, capsys):
    assert (repo / "data" / "d.jsonl").is_file()  # the working tree has it; the App would not
    code, report, err = run(capsys)
    assert code == EXIT_CONFIG_ERROR
    assert report["config_error"] == {"path": ".llmgate.yml", "line": 3, "message": MESSAGE}
    assert "file not found" not in err


def test_a_dataset_in_a_submodule_at_a_commit_is_named_as_such(repo, capsys):
    """The base side runs in a worktree of the commit, where the submodule is an empty
    folder (the field case: "file not found (commit it, or fix the path)")."""
    code, report, _ = run(capsys, "--head", "HEAD")
    assert code == EXIT_CONFIG_ERROR
    assert report["config_error"]["message"] == MESSAGE
