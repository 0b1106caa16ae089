"""A repository without any llmgate config: one ``neutral`` check, no comment; deleting a config
still fails. Through the real path: the gate job in a real arq worker (real Redis, real git,
the schema-checking fake GitHub), and ``llmgate run`` on real git repositories.

Field case: installed on every repository of an organisation, the App turned every pull request
of the repositories without a ``.llmgate.yml`` red ("no .llmgate.yml at head: add one to gate").
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.unit import worker_support
from tests.unit.monorepo_support import build_monorepo
from tests.unit.worker_support import CONFIG, DATASET, ECHO, commit, gate_payload, git
from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_GATE_FAILED, EXIT_PASS, main

github, tiny_repo = worker_support.github, worker_support.tiny_repo  # fixtures

NO_CONFIG_TITLE = "llmgate: neutral - no llmgate config"


@pytest.fixture(scope="module")
def bare_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A repository with no config (a vendored one under ``node_modules`` is not gated).

    Branches: ``pr/docs`` (a README change), ``pr/adds`` (adds the echo suite, 4 of 4 pass);
    ``fork``, a README change only at ``refs/pull/1/head`` (as a fork's head is in the base
    repository).
    """
    repo = tmp_path_factory.mktemp("bare") / "bare"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    shas = {"main": commit(repo, "main", {"README.md": "hello\n",
                                          "node_modules/dep/.llmgate.yml": "version: 1\n"})}
    shas["pr/docs"] = commit(repo, "pr/docs", {"README.md": "hello again\n"})
    shas["pr/adds"] = commit(repo, "pr/adds", {".llmgate.yml": CONFIG, "echo.py": ECHO,
                                               "evals/echo.jsonl": DATASET})
    shas["fork"] = commit(repo, "fork", {"README.md": "from a fork\n"})
    git(repo, "update-ref", "refs/pull/1/head", shas["fork"])
    git(repo, "branch", "-q", "-D", "fork")
    return repo, shas


@pytest.fixture(scope="module")
def discovered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Two services' configs found by discovery (no root config); ``pr/drop-all`` deletes
    both."""
    repo = tmp_path_factory.mktemp("mono") / "discovered"
    shas = build_monorepo(repo, listed=False)
    shas["pr/drop-all"] = commit(repo, "pr/drop-all", {"services/a/.llmgate.yml": None,
                                                       "services/b/.llmgate.yml": None})
    return repo, shas


def _run(repo: Path, shas: dict[str, str], branch: str, **facts: Any) -> dict[str, Any]:
    payload = gate_payload(str(repo), shas[branch], shas["main"])
    payload.update(facts)  # type: ignore[typeddict-item]
    return payload  # type: ignore[return-value]


def _only_check(state: dict[str, Any]) -> dict[str, Any]:
    runs: list[dict[str, Any]] = state["check_runs"]
    assert [r["name"] for r in runs] == ["llmgate"]
    return runs[0]


@pytest.mark.parametrize(("head", "facts"), [
    ("pr/docs", {}), ("fork", {"author": "stranger", "head_repo": "evil/bare"})],
    ids=["writer", "untrusted-fork"])
async def test_no_config_at_base_and_head_is_one_neutral_check_and_no_comment(
        github, bare_repo, tmp_path, head, facts):
    repo, shas = bare_repo
    await worker_support.run_jobs([_run(repo, shas, head, **facts)])
    mirror = tmp_path / "work" / "mirrors" / "acme__tiny.git"
    fetched = subprocess.run(["git", "-C", str(mirror), "cat-file", "-e", shas[head]],
                             capture_output=True, check=False).returncode == 0
    assert fetched == (head == "pr/docs")  # an untrusted head is not even fetched
    state = github.state()
    run = _only_check(state)
    assert (run["status"], run["conclusion"]) == ("completed", "neutral")
    assert run["output"]["title"] == NO_CONFIG_TITLE
    assert "Neither the base nor the head commit has a .llmgate.yml" in run["output"]["summary"]
    assert state["comments"] == []
    assert state["violations"] == []


async def test_a_config_added_at_head_is_gated_not_neutral(github, bare_repo):
    repo, shas = bare_repo
    await worker_support.run_jobs([_run(repo, shas, "pr/adds")])
    state = github.state()
    run = _only_check(state)
    assert (run["conclusion"], len(state["comments"])) == ("success", 1)


async def test_deleting_the_config_still_fails(github, tiny_repo):
    repo, shas = tiny_repo
    await worker_support.run_jobs([gate_payload(str(repo), shas["pr/noconfig"], shas["main"])])
    state = github.state()
    run = _only_check(state)
    assert run["conclusion"] == "failure"
    assert "no .llmgate.yml at head" in run["output"]["summary"]
    assert len(state["comments"]) == 1


async def test_deleting_every_discovered_config_of_a_monorepo_still_fails(github, discovered):
    repo, shas = discovered
    await worker_support.run_jobs([_run(repo, shas, "pr/drop-all")])
    run = _only_check(github.state())
    assert (run["conclusion"], run["output"]["title"]) == (
        "failure", "llmgate: fail - services/a fail; services/b fail")



# ----------------------------------------------------------------------- llmgate run
@pytest.fixture()
def in_bare(bare_repo, monkeypatch) -> dict[str, str]:
    repo, shas = bare_repo
    monkeypatch.chdir(repo)
    return shas


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["run", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_no_config_at_base_and_head_exits_0_neutral(in_bare, capsys):
    code, out, err = _cli(capsys, "--base", "main", "--head", "pr/docs", "--format", "json")
    report = json.loads(out)
    assert (code, report["conclusion"], report["headline"]) == (EXIT_PASS, "neutral",
                                                                "no llmgate config")
    assert err == ""


def test_cli_no_config_without_a_base_is_still_a_config_error(in_bare, capsys):
    code, out, err = _cli(capsys, "--head", "pr/docs")
    assert code == EXIT_CONFIG_ERROR
    assert "no .llmgate.yml at head" in err


def test_cli_deleting_every_discovered_config_fails(discovered, monkeypatch, capsys):
    repo, _ = discovered
    monkeypatch.chdir(repo)
    code, out, _ = _cli(capsys, "--base", "main", "--head", "pr/drop-all", "--format", "json")
    report = json.loads(out)
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    assert [c["report"]["headline"] for c in report["configs"]] == [
        "services/a/.llmgate.yml was deleted at head",
        "services/b/.llmgate.yml was deleted at head"]


def test_nothing_to_gate_reads_both_sides(tmp_path):
    from worker.pipeline.plan import nothing_to_gate

    empty = tmp_path / "empty"
    (empty / "node_modules" / "x").mkdir(parents=True)
    (empty / "node_modules" / "x" / ".llmgate.yml").write_text("version: 1\n")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / ".llmgate.yml").write_text("suites: [\n")
    folder = tmp_path / "folder"
    (folder / "svc").mkdir(parents=True)
    (folder / "svc" / ".llmgate.yml").write_text("version: 1\n")
    assert nothing_to_gate(empty, empty)
    assert not nothing_to_gate(empty, None)  # no base: a deletion cannot be ruled out
    assert not nothing_to_gate(empty, broken)  # a broken config at base is still a config
    assert not nothing_to_gate(broken, empty)
    assert not nothing_to_gate(empty, folder)
    assert not nothing_to_gate(folder, empty)
