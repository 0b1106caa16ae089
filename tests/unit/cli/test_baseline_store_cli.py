"""``llmgate run --baseline-store`` and ``llmgate baseline push``: a pull request's CI run whose
base commit did not change makes zero base calls (counted at the fake provider)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import model_config, write_repo
from tests.unit.worker_support import git
from worker.cli.main import EXIT_EXECUTION_ERROR, EXIT_PASS, main

pytestmark = pytest.mark.slow  # git processes and the fake provider's server
llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm
ROWS = [{"id": "a", "input": "hi"}, {"id": "b", "input": "ho"}]


@pytest.fixture()
def repo(llm: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with a two-example model suite on ``main`` and a README change on ``pr``."""
    llm.setup({"default_reply": "echo"})
    root = write_repo(tmp_path / "repo", model_config(
        llm.url, gate="{pass_rate: {min: 0.5, max_drop: 0.1}}",
        assertions="      - {type: contains, value: echo}\n"), ROWS)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "suite")
    git(root, "checkout", "-qb", "pr")
    (root / "README.md").write_text("docs\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "docs")
    git(root, "checkout", "-q", "main")
    monkeypatch.chdir(root)
    monkeypatch.delenv("REDIS_URL", raising=False)
    return root


def gate(capsys: pytest.CaptureFixture[str], store: str) -> tuple[int, dict]:
    code = main(["run", "--base", "main", "--head", "pr", "--no-cache", "--format", "json",
                 "--baseline-store", store])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("kind", ["directory", "git", "redis"])
def test_an_unchanged_base_commit_makes_zero_base_calls(kind, repo, llm, tmp_path, capsys,
                                                         request, monkeypatch):
    store = {"directory": str(tmp_path / "store"), "git": "git", "redis": "redis"}[kind]
    if kind == "redis":
        monkeypatch.setenv("REDIS_URL", request.getfixturevalue("redis_url"))
    code, report = gate(capsys, store)
    assert (code, len(llm.calls())) == (EXIT_PASS, 4)  # base and head: 2 examples each
    assert "base run now, stored for later pull requests" in report["base_source"]
    code, report = gate(capsys, store)
    assert (code, len(llm.calls())) == (EXIT_PASS, 6)  # head only
    assert "stored baseline from an earlier run's base" in report["base_source"]
    assert report["metrics"]["s"]["base"]["pass_rate"] == 1.0


def test_a_changed_base_commit_runs_base_again(repo, llm, tmp_path, capsys):
    store = str(tmp_path / "store")
    assert gate(capsys, store)[0] == EXIT_PASS and len(llm.calls()) == 4
    (repo / "CHANGES").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "main moves")
    assert main(["run", "--base", "main", "--head", "pr", "--base-tip", "--no-cache",
                 "--baseline-store", store]) == EXIT_PASS
    assert len(llm.calls()) == 8


def test_baseline_push_stores_at_head_and_pushes_the_ref(repo, llm, tmp_path, capsys):
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    assert main(["baseline", "push"]) == EXIT_PASS and len(llm.calls()) == 2
    assert "pushed refs/llmgate/baselines to origin" in capsys.readouterr().out
    git(repo, "push", "-q", "origin", "main", "pr")
    clone = tmp_path / "ci"  # a CI job's checkout: the default refspec leaves refs/llmgate out
    git(tmp_path, "clone", "-q", str(remote), str(clone))
    git(clone, "fetch", "-q", "origin", "refs/llmgate/*:refs/llmgate/*", "pr:pr")
    code = main(["run", "--repo", str(clone), "--base", "origin/main", "--head", "pr",
                 "--no-cache", "--format", "json", "--baseline-store", "git"])
    out, err = capsys.readouterr()
    assert code == EXIT_PASS, err
    report = json.loads(out)
    assert (code, len(llm.calls())) == (EXIT_PASS, 4)  # head only
    assert "stored baseline from the push to main" in report["base_source"]


@pytest.mark.parametrize(("store", "env", "words"), [
    ("redis", {}, "needs REDIS_URL"),
    ("redis", {"REDIS_URL": "unix:///tmp/redis.sock"}, "unix socket without a password"),
    ("git:refs/heads/main", {}, "must be under refs/llmgate/"),
])
def test_a_store_that_cannot_be_used_exits_3_before_any_call(store, env, words, repo, llm,
                                                              capsys, monkeypatch):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert gate_code(store) == EXIT_EXECUTION_ERROR
    assert words in capsys.readouterr().err and llm.calls() == []


def gate_code(store: str) -> int:
    return main(["run", "--base", "main", "--head", "pr", "--no-cache",
                 "--baseline-store", store])
