"""The Python API (``import llmgate``) on a real git repository: the verdict, the exit code and
the examples ``llmgate run`` gives for the same repository, through the same code path."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import llmgate
from tests.unit.worker_support import ASSERTION_LINE, build_tiny_repo, git
from worker.cli.main import main
from worker.version import VERSION

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny repository of `build_tiny_repo` (runs leave it as it was: worktrees only)."""
    repo = tmp_path_factory.mktemp("api") / "repo"
    build_tiny_repo(repo)
    return repo


@pytest.fixture(scope="module")
def dropped(tiny: Path) -> llmgate.Result:
    """``pr/drop`` (``bravo`` breaks) compared with ``main``."""
    return llmgate.compare("main", "pr/drop", tiny)


def test_a_comparison_gives_the_cli_verdict_and_exit_code(
        tiny: Path, dropped: llmgate.Result, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tiny)
    code = main(["run", "--base", "main", "--head", "pr/drop", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert (dropped.exit_code, dropped.conclusion) == (code, report["conclusion"])
    assert (code, dropped.passed) == (llmgate.EXIT_GATE_FAILED, False)
    assert dropped.headline.startswith("llmgate: fail, 1 regression")
    assert dropped.why == ("echo pass_rate max_drop 0.05: fail (dropped 0.25 from base 1.00 "
                           "(allowed 0.05))",)
    assert [(r.rule, r.status, r.blocks) for r in dropped.rules] == [
        ("min 0.50", "pass", False), ("max_drop 0.05", "fail", True)]
    assert dropped.base_sha and dropped.head_sha


def test_each_example_has_its_outcome_output_and_reasons(dropped: llmgate.Result) -> None:
    by_id = {e.id: e for e in dropped.examples}
    assert list(by_id) == ["alpha", "bravo", "charlie", "delta"]
    bravo = by_id["bravo"]
    assert (bravo.passed, bravo.regressed, bravo.failed_at_base) == (False, True, False)
    assert (bravo.output, bravo.expected, bravo.line) == ("nope", "bravo", 2)
    assert bravo.reasons == ('expected "bravo", got "nope"',
                             'regressed: equals: expected "bravo", got "nope"')
    assert dropped.failed_examples == dropped.regressions == (bravo,)
    assert all(e.passed and e.reasons == () for e in dropped.examples if e.id != "bravo")


def test_it_fails_closed_as_the_cli(tiny: Path) -> None:
    """A broken config is exit 2 with its line; a head that is no commit is exit 3; neither
    raises."""
    broken = llmgate.run(tiny, head="pr/broken")
    assert (broken.exit_code, broken.conclusion) == (llmgate.EXIT_CONFIG_ERROR, "failure")
    assert broken.config_error is not None and broken.config_error.line == ASSERTION_LINE
    assert broken.why[0].startswith(f"configuration error: .llmgate.yml:{ASSERTION_LINE}: "
                                    "unknown assertion type 'equalz'")
    missing = llmgate.run(tiny, head="no-such-branch")
    assert (missing.exit_code, missing.passed) == (llmgate.EXIT_EXECUTION_ERROR, False)
    assert missing.error is not None and "no-such-branch" in missing.error
    with pytest.raises(ValueError, match="--format"):
        llmgate.run(tiny, options=["--format", "json"])


def test_load_config_reads_a_file_or_folder_and_names_the_broken_line(tiny: Path,
                                                                       tmp_path: Path) -> None:
    assert [s.name for s in llmgate.load_config(tiny).suites] == ["echo"]
    assert llmgate.load_config(tiny / ".llmgate.yml").settings.concurrency == 4
    broken = tmp_path / ".llmgate.yml"
    broken.write_text((tiny / ".llmgate.yml").read_text().replace("equals", "equalz"))
    with pytest.raises(llmgate.ConfigError) as err:
        llmgate.load_config(broken)
    assert (err.value.path, err.value.line) == (".llmgate.yml", ASSERTION_LINE)
    with pytest.raises(llmgate.ConfigError, match="no such file"):
        llmgate.load_config(tmp_path / "missing.yml")


def test_the_api_is_versioned_and_noted_in_the_changelog() -> None:
    assert llmgate.__version__ == VERSION
    assert llmgate.API_VERSION == "1.0"
    assert all(hasattr(llmgate, name) for name in llmgate.__all__)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"Python API {llmgate.API_VERSION}" in changelog
    manual = (ROOT / "docs" / "python-api.md").read_text()
    assert [n for n in llmgate.__all__ if not re.search(rf"`{re.escape(n)}[`(]", manual)] == []


def test_a_refused_option_is_one_value_error_and_prints_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Fresh user of issue 33: ``--smoke 0`` raised "does not accept these options" (wrong:
    ``--smoke`` is accepted) and argparse's real reason went to stderr."""
    git(tmp_path, "init", "-q", "-b", "main")
    with pytest.raises(ValueError, match="--smoke: must be a whole number of at least 1"):
        llmgate.run(tmp_path, options=["--smoke", "0"])
    assert capsys.readouterr().err == ""
