"""``llmgate run --base main`` compares with the merge base of main and head, as the App does.

Field case: a branch started before ``main`` fixed three examples. ``llmgate run --base main``
compared the branch with main's tip and failed with 3 false regressions (the fixes the branch
does not have yet), while the App compared the same pull request with the merge base and
passed. Through ``llmgate run`` on a real git repository and the gate job in a real arq worker
against the schema-checking fake GitHub.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.unit import worker_support
from tests.unit.worker_support import commit, gate_payload, git
from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_GATE_FAILED, EXIT_PASS, main

github = worker_support.github  # fixture

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
#: The target: echoes its input, but garbles the words in BROKEN.
TARGET = """import json, sys
BROKEN = {broken}
example = json.load(open(sys.argv[1]))
text = example["input"]
json.dump({{"output": "nope" if text in BROKEN else text}}, open(sys.argv[2], "w"))
"""
CONFIG = """version: 1
{settings}suites:
  - name: echo
    dataset: evals/echo.jsonl
    target:
      command: python3 echo.py {{input_file}} {{output_file}}
    assertions:
      - type: equals
    gate:
      pass_rate:
        min: 0.4
        max_drop: 0.05
"""
DATASET = "".join(json.dumps({"id": w, "input": w, "expected": w}) + "\n" for w in WORDS)
FIXED = ["alpha", "bravo", "charlie"]


def build(dest: Path, settings: str = "") -> dict[str, str]:
    """``fork`` (A): 3 of 6 examples broken (0.5). ``feature``: A plus a README change.
    ``main``: A plus the fix of those 3 (1.0), committed after ``feature`` branched."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    shas = {"fork": commit(dest, "main", {
        ".llmgate.yml": CONFIG.format(settings=settings), "evals/echo.jsonl": DATASET,
        "echo.py": TARGET.format(broken=set(FIXED)),
    })}
    shas["feature"] = commit(dest, "feature", {"README.md": "a feature\n"})
    shas["main"] = commit(dest, "main", {"echo.py": TARGET.format(broken="set()")})
    return shas


@pytest.fixture(scope="module")
def moved_on(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("moved") / "repo"
    return repo, build(repo)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["run", *args, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def _regressed(report: dict[str, Any]) -> list[str]:
    return sorted(r["example_id"] for r in report["regressions"])


def test_cli_compares_with_the_merge_base_like_the_app(moved_on, monkeypatch, capsys):
    repo, shas = moved_on
    monkeypatch.chdir(repo)
    code, report = _run(capsys, "--base", "main", "--head", "feature")
    assert (code, report["conclusion"], _regressed(report)) == (EXIT_PASS, "success", [])
    assert report["base_sha"] == shas["fork"]
    assert f"compared with {shas['fork'][:7]}, the merge base of main ({shas['main'][:7]}) " \
           "and head" in " ".join(report["notes"])


def test_cli_base_tip_compares_with_the_tip_and_finds_the_3_differences(moved_on, monkeypatch,
                                                                        capsys):
    repo, shas = moved_on
    monkeypatch.chdir(repo)
    code, report = _run(capsys, "--base", "main", "--head", "feature", "--base-tip")
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    assert _regressed(report) == FIXED  # exactly the 3 examples main fixed
    assert report["base_sha"] == shas["main"]


def test_cli_working_tree_head_uses_its_merge_base_too(moved_on, tmp_path, monkeypatch, capsys):
    repo, shas = moved_on
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-local", str(repo), str(clone)], check=True)
    git(clone, "switch", "-q", "-c", "feature", "origin/feature")
    git(clone, "branch", "-q", "-f", "main", "origin/main")
    monkeypatch.chdir(clone)
    code, report = _run(capsys, "--base", "main")
    assert (code, _regressed(report), report["base_sha"]) == (EXIT_PASS, [], shas["fork"])


def test_cli_honours_settings_base_tip(tmp_path, monkeypatch, capsys):
    shas = build(tmp_path / "tip", settings="settings:\n  base: tip\n")
    monkeypatch.chdir(tmp_path / "tip")
    code, report = _run(capsys, "--base", "main", "--head", "feature")
    assert (code, _regressed(report), report["base_sha"]) == (EXIT_GATE_FAILED, FIXED,
                                                              shas["main"])
    assert "as settings.base: tip says" in " ".join(report["notes"])


def old_fork_point(dest: Path, old_config: str | None) -> dict[str, str]:
    """Case from the field (tester, issue 12, H1): ``pr`` branches from an old commit of main
    (``old_config`` there: none, or weaker rules) and regresses 3 of 6 examples; main's tip
    has the strict config (and, in the second case, ``settings.base: tip``)."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    files = {"evals/echo.jsonl": DATASET, "echo.py": TARGET.format(broken="set()")}
    if old_config is not None:
        files[".llmgate.yml"] = old_config
    shas = {"old": commit(dest, "main", files)}
    shas["pr"] = commit(dest, "pr", {"echo.py": TARGET.format(broken=set(FIXED))})
    strict = CONFIG.format(settings="").replace("min: 0.4", "min: 0.8")
    shas["main"] = commit(dest, "main", {".llmgate.yml": strict})
    return shas


@pytest.mark.parametrize("old_config", [None, CONFIG.format(settings="").replace(
    "        max_drop: 0.05\n", "")])
def test_a_pull_request_cannot_choose_its_gate_by_its_fork_point(tmp_path, monkeypatch, capsys,
                                                                 old_config):
    shas = old_fork_point(tmp_path / "repo", old_config)
    monkeypatch.chdir(tmp_path / "repo")
    code, report = _run(capsys, "--base", "main", "--head", "pr")
    if old_config is None:  # before: neutral "no llmgate config", exit 0
        assert (code, report["conclusion"]) == (EXIT_CONFIG_ERROR, "failure")
        assert "no .llmgate.yml at head" in report["config_error"]["message"]
        return
    assert (code, report["conclusion"], _regressed(report), report["base_sha"]) == (
        EXIT_GATE_FAILED, "failure", FIXED, shas["main"])  # before: success, exit 0
    assert "changed after this branch forked from it" in " ".join(report["notes"])


async def test_the_app_compares_the_same_pull_request_with_the_same_base(github, moved_on):
    repo, shas = moved_on
    await worker_support.run_jobs([gate_payload(str(repo), shas["feature"], shas["main"])])
    state = github.state()
    [run] = state["check_runs"]
    assert (run["conclusion"], run["annotations"]) == ("success", [])
    assert f"**base** `{shas['fork'][:7]}`" in run["output"]["summary"]


@pytest.mark.parametrize("old_config", [None, CONFIG.format(settings="").replace(
    "        max_drop: 0.05\n", "")])
async def test_the_app_gates_an_old_fork_point_by_the_base_branch_tip(github, tmp_path,
                                                                      old_config):
    repo = tmp_path / "repo"
    shas = old_fork_point(repo, old_config)
    await worker_support.run_jobs([gate_payload(str(repo), shas["pr"], shas["main"])])
    [run] = github.state()["check_runs"]
    assert run["conclusion"] == "failure"
    expected = "no .llmgate.yml at head" if old_config is None else f"**base** `{shas['main'][:7]}`"
    assert expected in run["output"]["summary"]
