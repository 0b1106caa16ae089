"""What the tests of ``llmgate run`` on the tiny repository share (tests/unit/cli/test_cli*.py).

The fixtures ``tiny_template`` (one tiny repository per test file, `worker_support.
build_tiny_repo`) and ``tiny`` (a private clone of it as the current directory); a test file
imports `tiny_repo_template` and `tiny_clone` to have them. And running the command in process,
reading its report, and checking that it left nothing behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.unit.worker_support import build_tiny_repo, clone_branches, git, iter_worktrees
from worker.cli.main import main

#: The repository's root folder.
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", name="tiny_template")
def tiny_repo_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The fixture ``tiny_template``: one tiny repository per module; tests copy it (git is
    cheap, but not free)."""
    repo = tmp_path_factory.mktemp("tiny") / "repo"
    return repo, build_tiny_repo(repo)


@pytest.fixture(name="tiny")
def tiny_clone(tiny_template: tuple[Path, dict[str, str]], tmp_path: Path,
         monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, str]]:
    """The fixture ``tiny``: a private clone of the tiny repository (all branches), as the
    current directory.

    Temporary directories go to ``tmp_path / "tmp"`` so a test can see what was left there.
    """
    template, shas = tiny_template
    repo = clone_branches(template, tmp_path / "repo", shas)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.chdir(repo)
    return repo, shas


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``llmgate run *args`` in this process: ``(exit code, stdout, stderr)``."""
    code = main(["run", *args])
    out, err = capsys.readouterr()
    return code, out, err


def outcomes(report: dict[str, Any]) -> dict[str, str]:
    """A JSON report's rule -> status."""
    return {o["rule"]: o["status"] for o in report["outcomes"]}


def untouched_from_now(tmp_root: Path) -> None:
    """Date ``tmp_root`` back to 1970: making or removing anything in it moves that date."""
    os.utime(tmp_root, (0, 0))


def assert_nothing_ran(tmp_root: Path) -> None:
    """No temporary worktree or folder was made (and removed) since `untouched_from_now`."""
    assert tmp_root.stat().st_mtime == 0 and list(tmp_root.iterdir()) == []


def assert_untouched(repo: Path, tmp_root: Path) -> None:
    """The repository is clean, has no extra worktree, and ``tmp_root`` is empty."""
    assert git(repo, "status", "--porcelain") == ""
    assert list(iter_worktrees(repo)) == [str(repo)]
    assert list(tmp_root.iterdir()) == []
