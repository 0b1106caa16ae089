"""The GitHub Action installs llmgate from its own repository (a checkout, a git ref): the
slow half of tests/unit/cli/test_github_action.py, apart so that pytest-xdist's
``--dist loadfile`` can run it beside the rest (issue 34)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.unit import worker_support
from tests.unit.cli.action_support import (
    action_step,
    run_action_step,
    source_checkout,
)
from tests.unit.worker_support import (
    commit,
)
from worker.version import VERSION


@pytest.mark.slow
def test_the_action_installs_llmgate_from_its_own_checkout(tmp_path: Path):
    """The default (no ``version``): pip builds the action's own repository, two levels above
    ``GITHUB_ACTION_PATH``, into a venv of its own; ``llmgate --version`` there is the
    checkout's worker/version.py, and the gate step's ``LLMGATE`` is that command. Its
    dependencies are left out here (``PIP_NO_DEPS``): ``--version`` needs none."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    action_path = source_checkout(checkout)
    version = checkout / "worker" / "version.py"
    version.write_text(version.read_text().replace(f'VERSION = "{VERSION}"',
                                                   'VERSION = "7.7.7"'))  # the pinned release's
    done = run_action_step(tmp_path, "install llmgate", {}, action_path=action_path,
                           PIP_NO_DEPS="1")
    assert done.returncode == 0, done.stderr
    venv = tmp_path / "llmgate-venv"
    assert done.stdout == f"llmgate: installed llmgate 7.7.7 from {checkout} into {venv}\n"
    llmgate = action_step("gate")["env"]["LLMGATE"].replace("${{ runner.temp }}", str(tmp_path))
    assert llmgate == str(venv / "bin" / "llmgate")
    assert subprocess.run([llmgate, "--version"], capture_output=True, text=True,
                          check=True).stdout == "llmgate 7.7.7\n"


@pytest.mark.slow
def test_the_action_installs_a_git_ref_of_its_own_repository(tmp_path: Path):
    """``version: v7.7.7``: pip installs the action's repository (``github.action_repository``
    on ``GITHUB_SERVER_URL``, here a folder) at that tag; the version the installed
    distribution declares is what ``llmgate --version`` must print."""
    server = tmp_path / "server"
    repo = server / "OWNER" / "llmgate"
    repo.mkdir(parents=True)
    source_checkout(repo)
    version = repo / "worker" / "version.py"
    version.write_text(version.read_text().replace(f'VERSION = "{VERSION}"', 'VERSION = "7.7.7"'))
    worker_support.git(repo, "init", "-q", "-b", "main")
    commit(repo, "main", {"NOTES": "v7.7.7"})
    worker_support.git(repo, "tag", "v7.7.7")
    runner = tmp_path / "runner"
    runner.mkdir()
    done = run_action_step(runner, "install llmgate", {"version": "v7.7.7"},
                           GITHUB_SERVER_URL=server.as_uri(), PIP_NO_DEPS="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"llmgate: installed llmgate 7.7.7 from git+{server.as_uri()}/OWNER/"
                           f"llmgate@v7.7.7 into {runner / 'llmgate-venv'}\n")
