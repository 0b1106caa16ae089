"""``llmgate run`` on real git repositories: exit codes, formats, worktrees left behind (none).

Most cases use the four-example repository of `worker_support.build_tiny_repo` (fast); one runs
the shipped support-bot example as a real ``python -m worker.cli`` process.

Config errors are in test_cli_config_errors.py, ``--output`` in test_cli_outputs.py, the
command as a process (Ctrl-C, imports, the shipped example) in test_cli_as_process.py; what they
share: tests/unit/cli_support.py.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.cli_support import (
    assert_untouched,
    outcomes,
    run_cli,
    tiny_clone,  # noqa: F401 (the fixture tiny)
    tiny_repo_template,  # noqa: F401 (the fixture tiny_template)
)
from tests.unit.worker_support import git
from worker.cli.main import (
    EXIT_CONFIG_ERROR,
    EXIT_EXECUTION_ERROR,
    EXIT_GATE_FAILED,
    EXIT_PASS,
    main,
    repo_root,
)


def test_head_below_base_by_more_than_max_drop_exits_1(tiny, tmp_path, capsys):
    repo, shas = tiny
    code, out, err = run_cli(capsys, "--base", "main", "--head", "pr/drop", "--format", "json")
    report = json.loads(out)
    assert (code, report["conclusion"], err) == (EXIT_GATE_FAILED, "failure", "")
    assert outcomes(report) == {"min 0.50": "pass", "max_drop 0.05": "fail"}
    assert report["metrics"]["echo"]["base"]["pass_rate"] == 1.0
    assert report["metrics"]["echo"]["head"]["pass_rate"] == 0.75
    assert (report["base_sha"], report["head_sha"]) == (shas["main"], shas["pr/drop"])
    assert [r["example_id"] for r in report["regressions"]] == ["bravo"]
    assert_untouched(repo, tmp_path / "tmp")


def test_without_base_only_absolute_rules_apply(tiny, tmp_path, capsys):
    repo, _ = tiny
    code, out, _ = run_cli(capsys, "--head", "pr/drop", "--format", "json")
    report = json.loads(out)
    assert (code, report["conclusion"]) == (EXIT_PASS, "success")
    assert outcomes(report) == {"min 0.50": "pass", "max_drop 0.05": "skipped"}
    assert report["base_sha"] is None
    assert "no base given: only absolute rules (min) apply" in report["notes"]
    assert_untouched(repo, tmp_path / "tmp")


def test_working_tree_is_the_head_by_default(tiny, tmp_path, capsys):
    repo, _ = tiny
    code, out, _ = run_cli(capsys, "--base", "main")
    assert code == EXIT_PASS and "llmgate: pass" in out
    echo = repo / "echo.py"
    echo.write_text(echo.read_text().replace('BROKEN = ""', 'BROKEN = "a"'))  # uncommitted
    code, out, _ = run_cli(capsys, "--base", "main", "--format", "json")
    report = json.loads(out)
    assert (code, report["head_sha"]) == (EXIT_GATE_FAILED, "")
    assert report["metrics"]["echo"]["head"]["pass_rate"] == 0.0  # every word has an "a"
    assert git(repo, "status", "--porcelain") == "M echo.py"


def test_runs_from_a_subdirectory_against_the_repository_root(tiny, monkeypatch, capsys):
    repo, _ = tiny
    monkeypatch.chdir(repo / "evals")
    code, out, _ = run_cli(capsys, "--base", "main", "--head", "pr/drop")
    assert code == EXIT_GATE_FAILED and "max_drop 0.05" in out
    assert repo_root(repo / "evals") == repo


@pytest.mark.parametrize(("args", "message"), [
    (["--base", "no-such-branch"], "'no-such-branch' names no commit"),
    (["--base=-x"], "--base: expected a ref name or sha, got '-x'"),
    (["--base", "main", "--head", "0" * 40], "names no commit"),
])
def test_execution_errors_exit_3_with_one_line(tiny, tmp_path, capsys, args, message):
    repo, _ = tiny
    code, out, err = run_cli(capsys, *args)
    assert code == EXIT_EXECUTION_ERROR
    assert out == ""
    assert err.count("\n") == 1 and message in err and "Traceback" not in err
    assert "rev-parse" not in err  # the user named a ref; git's argv is noise (tester's nit)
    assert_untouched(repo, tmp_path / "tmp")


def test_output_writes_the_report_to_the_file(tiny, capsys):
    repo, _ = tiny
    target = repo.parent / "report.md"
    code, out, _ = run_cli(capsys, "--base", "main", "--head", "pr/docs", "--output", str(target))
    assert (code, out) == (EXIT_PASS, "")
    text = target.read_text()
    assert text.startswith("### ✅ llmgate: pass")
    assert "| echo | pass_rate | 1.000 | 1.000 |" in text


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == EXIT_CONFIG_ERROR
    assert "usage: llmgate" in capsys.readouterr().out


def test_help_shows_plain_text_not_docstring_markup(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["run", "--help"], ["calibrate", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        assert "``" not in capsys.readouterr().out
