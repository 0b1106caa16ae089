"""A cache the pull request can write never decides ``llmgate run``'s verdict (issue 30, part 3),
through the real CLI on a real git repository, litellm over real HTTP to the fake provider.

The field cases: the GitLab template kept the response cache in the project folder, so a
``responses.sqlite3`` committed (or once uploaded to the CI cache) answered the regressing
head's calls and it passed (exit 0); and a head that renamed ``api_key_env`` to an unset
variable was answered from base's cached answers (exit 0 with the cache, 1 with ``--no-cache``).
The repository is tests/unit/failclosed_support.py's.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import failclosed_support, llm_support
from tests.unit.failclosed_support import LINES
from tests.unit.worker_support import clone_branches, git
from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_GATE_FAILED, main
from worker.evals.llm.disk_cache import default_path

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm
failclosed_repo = failclosed_support.failclosed_repo
#: Where the old GitLab template kept the response cache: inside the project folder.
IN_TREE = ".llmgate-cache"


@pytest.fixture()
def repo(failclosed_repo: tuple[Path, dict[str, str]], tmp_path: Path, llm: FakeLLMServer,
         monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clone with every branch, as the current folder; the on-disk cache, no real keys."""
    source, shas = failclosed_repo
    clone = clone_branches(source, tmp_path / "repo", shas)
    for name in ("REDIS_URL", "FAKE_LLM_KEY_TYPO", "LLMGATE_ALLOWED_API_BASES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(clone)
    return clone


def gate(capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, dict[str, Any], str]:
    code = main(["run", *flags, "--format", "json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else {}, err


def plant_answers(repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str],
                  monkeypatch: pytest.MonkeyPatch, plant: Path) -> None:
    """Commit on ``pr/regress`` (checked out) a ``.llmgate-cache/responses.sqlite3`` holding
    answers to head's calls that pass (got from a provider that says "refund" to anything)."""
    monkeypatch.setenv("LLMGATE_CACHE_DIR", str(plant))
    llm.setup({"default_reply": "refund granted"})
    assert gate(capsys, "--head", "pr/regress")[0] == 0  # head alone: its answers pass
    git(repo, "switch", "-q", "pr/regress")
    (repo / IN_TREE).mkdir()
    shutil.copy(default_path(os.environ), repo / IN_TREE / "responses.sqlite3")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a cache that passes")
    llm.setup({"default_reply": None})  # the provider as it is: the prompt regressed
    llm.reset()


def test_a_committed_cache_is_never_read_and_the_regression_fails(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    plant_answers(repo, llm, capsys, monkeypatch, tmp_path / "plant")
    monkeypatch.setenv("LLMGATE_CACHE_DIR", str(tmp_path / "outside"))  # the default's place
    code, report, _ = gate(capsys, "--base", "main")
    assert (code, report["conclusion"], len(report["regressions"])) == (EXIT_GATE_FAILED,
                                                                       "failure", 5)
    assert len(llm.calls()) == 10  # base's 5 and head's 5: nothing came from the file


@pytest.mark.parametrize("where", ["folder", "symlink", "home"])
def test_a_cache_folder_inside_the_repository_is_refused(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str) -> None:
    """Before: with ``LLMGATE_CACHE_DIR`` in the project (the GitLab template's), exit 0."""
    plant_answers(repo, llm, capsys, monkeypatch, tmp_path / "plant")
    if where == "folder":
        monkeypatch.setenv("LLMGATE_CACHE_DIR", str(repo / IN_TREE))
    elif where == "symlink":  # a folder outside that leads back in
        (tmp_path / "link").symlink_to(repo / IN_TREE)
        monkeypatch.setenv("LLMGATE_CACHE_DIR", str(tmp_path / "link"))
    else:  # the default folder, ~/.cache/llmgate, with HOME in the repository
        (repo / ".cache").symlink_to(repo / IN_TREE, target_is_directory=True)
        (repo / IN_TREE / "llmgate").mkdir()
        shutil.copy(repo / IN_TREE / "responses.sqlite3", repo / IN_TREE / "llmgate")
        for name in ("LLMGATE_CACHE_DIR", "XDG_CACHE_HOME"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HOME", str(repo))
    planted = (repo / IN_TREE / "responses.sqlite3").read_bytes()
    code, report, err = gate(capsys, "--base", "main")
    assert (code, report["conclusion"], len(report["regressions"])) == (EXIT_GATE_FAILED,
                                                                       "failure", 5)
    assert "the response cache is off for this run" in err
    assert f"inside the repository {repo}" in err and "LLMGATE_CACHE_DIR" in err
    assert len(llm.calls()) == 10
    assert (repo / IN_TREE / "responses.sqlite3").read_bytes() == planted  # nor written


def test_no_cache_has_no_cache_folder_to_refuse(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMGATE_CACHE_DIR", str(repo / IN_TREE))
    code, _, err = gate(capsys, "--base", "main", "--head", "pr/regress", "--no-cache")
    assert code == EXIT_GATE_FAILED and "response cache" not in err
    assert not (repo / IN_TREE).exists()


@pytest.mark.parametrize("cache", [[], ["--no-cache"]])
def test_a_head_whose_key_is_unset_fails_with_the_cache_as_without(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str],
        cache: list[str]) -> None:
    """Field case: only ``api_key_env`` renamed, so head's calls have base's cache keys.
    Before: exit 0 with the cache (base's answers served), exit 1 with ``--no-cache``. Issue 31:
    head is refused at configuration before base sends a call (before, base's 5 were sent)."""
    code, report, _ = gate(capsys, "--base", "main", "--head", "pr/keyenv-only", *cache)
    assert (code, report["conclusion"]) == (EXIT_CONFIG_ERROR, "failure")
    error = report["config_error"]
    assert (error["path"], error["line"]) == (".llmgate.yml", LINES["api_key_env"])
    assert error["message"].startswith("the target: the worker has no FAKE_LLM_KEY_TYPO")
    assert llm.calls() == []  # neither base nor head sent a call
    again = gate(capsys, "--base", "main", "--head", "pr/keyenv-only", *cache)
    assert again[0] == EXIT_CONFIG_ERROR  # the same verdict, still without a call


@pytest.mark.parametrize("cache", [[], ["--no-cache"]])
def test_a_head_without_a_price_under_a_budget_is_refused_with_the_cache_as_without(
        repo: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str],
        cache: list[str]) -> None:
    """Head drops its model's ``pricing`` under base's ``max_cost_usd``: its spending cannot be
    bounded. Before: exit 0 with the cache (base's answers, same key), 2 with ``--no-cache``."""
    code, report, _ = gate(capsys, "--base", "priced", "--head", "pr/unpriced", *cache)
    assert code == EXIT_CONFIG_ERROR
    error = report["config_error"]
    assert (error["path"], error["line"]) == (".llmgate.yml", LINES["model"] + 1)  # + budget
    assert error["message"].startswith("the target: openai/bot-model has no known price")
