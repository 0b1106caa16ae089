"""``llmgate run --output``: the report goes to the file, its folder is made, and an output that
cannot be written is refused before anything runs.
"""

from __future__ import annotations

from tests.unit.cli_support import (
    assert_nothing_ran,
    run_cli,
    tiny_clone,  # noqa: F401 (the fixture tiny)
    tiny_repo_template,  # noqa: F401 (the fixture tiny_template)
    untouched_from_now,
)
from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_EXECUTION_ERROR, EXIT_PASS


def test_an_output_in_a_missing_folder_gets_its_folder_made(tiny, capsys):
    """Field case (fresh-clone tester): ``--output /nonexistent/r.md`` failed after the run;
    then it was refused; now the folder is made, as ``mkdir -p`` (issue 33)."""
    repo, _ = tiny
    code, out, _ = run_cli(capsys, "--base", "main", "--output", "missing-dir/deeper/report.md")
    assert (code, out) == (EXIT_PASS, "")
    assert "llmgate" in (repo / "missing-dir" / "deeper" / "report.md").read_text()


def test_an_output_that_is_a_folder_is_refused_before_anything_runs(tiny, tmp_path, capsys):
    repo, _ = tiny
    (repo / "reports").mkdir()
    untouched_from_now(tmp_path / "tmp")
    code, out, err = run_cli(capsys, "--base", "main", "--output", "reports")
    assert (code, out, err) == (EXIT_CONFIG_ERROR, "",  # a misuse (issue 33)
                                "llmgate: cannot write reports: it is a folder\n")
    assert_nothing_ran(tmp_path / "tmp")


def test_an_output_that_cannot_be_written_is_refused_before_anything_runs(tiny, tmp_path,
                                                                          capsys):
    """Field case (new-user tester): ``--output /sys/r.md`` failed "Permission denied" only
    after the whole eval had run. /proc refuses a new file even to root."""
    untouched_from_now(tmp_path / "tmp")
    code, out, err = run_cli(capsys, "--base", "main", "--output", "/proc/llmgate-report.md")
    assert (code, out) == (EXIT_EXECUTION_ERROR, "")
    assert err.startswith("llmgate: cannot write /proc/llmgate-report.md: ")
    assert err.count("\n") == 1 and err.endswith("\n")
    assert_nothing_ran(tmp_path / "tmp")


def test_the_early_output_check_leaves_no_file_behind_when_the_run_fails(tiny, capsys):
    repo, _ = tiny
    code, _, _ = run_cli(capsys, "--base", "no-such-ref", "--output", "report.md")
    assert code == EXIT_EXECUTION_ERROR and not (repo / "report.md").exists()
