"""The pytest plugin (llmgate/pytest_plugin.py) through pytest itself (``pytester``): a real
git repository whose ``.llmgate.yml`` runs a command target, collected beside a unit test."""

from __future__ import annotations

import pytest

import llmgate
from tests.unit.worker_support import CONFIG, DATASET, ECHO, commit, git

pytest_plugins = ["pytester"]

#: ``bravo`` fails (1 of 4, pass rate 0.75) and the suite asks for at least 0.9.
FILES = {".llmgate.yml": CONFIG.replace("min: 0.5", "min: 0.9"),
         "echo.py": ECHO.replace('BROKEN = ""', 'BROKEN = "bravo"'), "evals/echo.jsonl": DATASET,
         "test_unit.py": "def test_unit():\n    assert True\n",
         "pytest.ini": "[pytest]\nasyncio_default_fixture_loop_scope = function\n"}


@pytest.fixture(scope="module")
def engine_imported(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One gate run in this process first, so the engine and scipy are imported once:
    pytester restores ``sys.modules`` after each inline run, which would import them again
    every time."""
    folder = tmp_path_factory.mktemp("warm")
    git(folder, "init", "-q", "-b", "main")
    commit(folder, "main", dict(FILES), "echo bot")
    assert llmgate.run(folder).exit_code == llmgate.EXIT_GATE_FAILED


@pytest.fixture()
def repo(pytester: pytest.Pytester, engine_imported: None) -> pytest.Pytester:
    """``pytester.path`` as a git repository holding `FILES` (committed on ``main``)."""
    git(pytester.path, "init", "-q", "-b", "main")
    commit(pytester.path, "main", dict(FILES), "echo bot")
    return pytester


def test_nothing_is_collected_without_opting_in(repo: pytest.Pytester) -> None:
    """The plugin is installed (entry point) but collects no .llmgate.yml unless asked."""
    result = repo.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["test_unit.py::test_unit", "1 test collected*"])
    assert ".llmgate.yml" not in result.stdout.str()


def test_every_example_and_rule_is_an_item_with_its_reason(repo: pytest.Pytester) -> None:
    result = repo.runpytest("--llmgate", "-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=3)  # 3 examples, the unit test; bravo, rule, verdict
    result.stdout.fnmatch_lines_random([
        "*.llmgate.yml::echo::alpha PASSED*", "*.llmgate.yml::echo::bravo FAILED*",
        "*.llmgate.yml::echo::gate::pass_rate FAILED*", "*.llmgate.yml::verdict FAILED*",
        "*test_unit.py::test_unit PASSED*",
        "*echo::bravo (line 2) failed:*", '*expected "bravo", got "nope"*',
        "*min 0.90: fail (base None, head 0.75)*", "*llmgate run would exit 1 (failure)*"])


def test_k_selects_one_example_and_x_stops_at_the_first_failure(repo: pytest.Pytester) -> None:
    selected = repo.runpytest("-o", "llmgate=true", "-k", "charlie", "-p", "no:cacheprovider")
    selected.assert_outcomes(passed=1, deselected=6)
    stopped = repo.runpytest("--llmgate", "-x", "-p", "no:cacheprovider", ".llmgate.yml")
    stopped.assert_outcomes(passed=1, failed=1)  # alpha, then bravo stops the session
    stopped.stdout.fnmatch_lines(["*stopping after 1 failures*"])
