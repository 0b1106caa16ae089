"""``llmgate run`` on real git repositories: a broken, missing or misplaced config exits 2 and
says where; outside a git repository the folder's own config is gated.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.unit.cli_support import (
    outcomes,
    run_cli,
    tiny_clone,  # noqa: F401 (the fixture tiny)
    tiny_repo_template,  # noqa: F401 (the fixture tiny_template)
)
from tests.unit.worker_support import ASSERTION_LINE, git
from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_PASS


def test_broken_config_exits_2_naming_file_and_line(tiny, capsys):
    code, out, err = run_cli(capsys, "--base", "main", "--head", "pr/broken", "--format", "json")
    report = json.loads(out)
    assert code == EXIT_CONFIG_ERROR
    assert report["config_error"]["path"] == ".llmgate.yml"
    assert report["config_error"]["line"] == ASSERTION_LINE
    assert "equalz" in report["config_error"]["message"]
    assert err.count("\n") == 1
    assert err.startswith(f"llmgate: configuration error: .llmgate.yml:{ASSERTION_LINE}: ")


def test_a_config_error_report_still_names_the_commits(tiny, capsys):
    _, shas = tiny
    code, out, _ = run_cli(capsys, "--base", "main", "--head", "pr/broken")
    assert code == EXIT_CONFIG_ERROR
    assert f"`{shas['pr/broken'][:7]}`" in out and f"`{shas['main'][:7]}`" in out
    assert "working tree" not in out


def test_missing_config_exits_2(tiny, capsys):
    code, out, err = run_cli(capsys, "--base", "main", "--head", "pr/noconfig")
    assert code == EXIT_CONFIG_ERROR
    assert "no .llmgate.yml at head" in out
    assert err == "llmgate: configuration error: .llmgate.yml: no .llmgate.yml at head: " \
                  "add one to gate\n"


def test_config_outside_the_repository_exits_2(tiny, capsys):
    code, _, err = run_cli(capsys, "--config", "../outside.yml")
    assert code == EXIT_CONFIG_ERROR
    assert "must stay inside the repository" in err


@pytest.mark.parametrize("dot_git", ["none", "empty folder"])
def test_outside_a_git_repository_base_exits_2(tmp_path, monkeypatch, capsys, dot_git):
    plain = tmp_path / "plain"
    plain.mkdir()
    if dot_git == "empty folder":  # not a repository (no HEAD): the tester's odd input
        (plain / ".git").mkdir()
    monkeypatch.chdir(plain)
    code, out, err = run_cli(capsys, "--base", "main")
    assert (code, out) == (EXIT_CONFIG_ERROR, "")  # a misuse (issue 33)
    assert err == f"llmgate: --base and --head need a git repository; {plain} is not inside one\n"


def test_outside_a_git_repository_without_a_config_exits_2_and_looks_no_further(
        tmp_path, monkeypatch, capsys):
    plain = tmp_path / "plain"
    (plain / "below").mkdir(parents=True)
    (plain / "below" / ".llmgate.yml").write_text("version: [\n")  # never read: not gated
    monkeypatch.chdir(plain)
    code, out, err = run_cli(capsys)
    assert (code, out) == (EXIT_CONFIG_ERROR, "")
    assert err == (f"llmgate: no .llmgate.yml in {plain}, which is not inside a git "
                   "repository: run llmgate in your repository, or name a config file with "
                   "--config\n")


def test_outside_a_git_repository_the_folders_own_config_is_gated(tiny, tmp_path, monkeypatch,
                                                                  capsys):
    repo, _ = tiny
    plain = tmp_path / "plain"
    shutil.copytree(repo, plain, ignore=shutil.ignore_patterns(".git"))
    monkeypatch.chdir(plain)
    code, out, _ = run_cli(capsys, "--format", "json")
    report = json.loads(out)
    assert (code, report["conclusion"]) == (EXIT_PASS, "success")
    assert outcomes(report) == {"min 0.50": "pass", "max_drop 0.05": "skipped"}


def test_a_local_config_error_says_to_run_again_not_to_push(tiny, capsys):
    code, out, _ = run_cli(capsys, "--base", "main", "--head", "pr/broken")
    assert code == EXIT_CONFIG_ERROR
    assert "Fix the file and run `llmgate run` again." in out
    assert "push" not in out and "pull request" not in out


def test_a_config_folder_is_looked_up_at_head_not_in_the_working_tree(tiny, capsys):
    """Field case (tester): ``--config sub`` with ``sub/`` committed only at ``--head`` said
    "no sub at head", while ``--config sub/.llmgate.yml`` passed."""
    repo, _ = tiny
    git(repo, "switch", "-q", "-c", "feat")
    (repo / "sub").mkdir()
    for name in (".llmgate.yml", "echo.py", "evals"):
        source = repo / name
        if source.is_dir():
            shutil.copytree(source, repo / "sub" / name)
        else:
            shutil.copy(source, repo / "sub" / name)
    git(repo, "add", "sub")
    git(repo, "commit", "-q", "-m", "a folder config")
    git(repo, "switch", "-q", "main")
    assert not (repo / "sub").exists()
    code, out, _ = run_cli(capsys, "--base", "main", "--head", "feat", "--config", "sub",
                           "--format", "json")
    assert (code, json.loads(out)["conclusion"]) == (EXIT_PASS, "success")


def test_a_config_error_in_json_still_names_the_commits(tiny, capsys):
    _, shas = tiny
    code, out, _ = run_cli(capsys, "--base", "main", "--head", "pr/broken", "--format", "json")
    report = json.loads(out)
    assert code == EXIT_CONFIG_ERROR
    assert (report["head_sha"], report["base_sha"]) == (shas["pr/broken"], shas["main"])
