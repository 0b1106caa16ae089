"""``llmgate migrate`` end to end: litellm over real HTTP to the fake provider.

The fake's rules stand for the three models: ``old-model`` (today's) and ``new-model`` answer
"Refund sent." unless the prompt says "Always state the amount", when ``new-model`` names the
amount the suite asks for; ``optimizer`` proposes three rewrites, one of them that sentence and
one that loses the template's variable (dropped).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import endpoint_yaml, write_repo
from worker.cli.main import main
from worker.cli.migrate import EXIT_BUDGET, EXIT_CONFIG_ERROR, EXIT_OK

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm

PRICE = "pricing: {input: 1, output: 1}"
PROMPT = "Customer says: {{ input }}"
WINNER = "Always state the amount. Customer says: {{ input }}"
RULES = [
    {"model": "optimizer", "match": "Template:",
     "reply": f"=== VARIANT ===\nBe brief. {PROMPT}\n=== VARIANT ===\n{WINNER}\n"
              "=== VARIANT ===\nA rewrite that lost the variable."},
    {"model": "new-model", "match": "Always state the amount", "reply": "Refund of $10 sent."},
    {"match": "Customer says", "reply": "Refund sent."}]


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)


def _repo(root: Path, url: str, settings: str = "concurrency: 4") -> Path:
    target = endpoint_yaml(url, "openai/old-model", f"prompt: prompts/p.txt, {PRICE}")
    config = (f"version: 1\nsettings: {{{settings}}}\nsuites:\n  - name: s\n"
              f"    dataset: evals/d.jsonl\n    target: {target}\n"
              "    assertions:\n      - type: contains\n        value: \"$10\"\n")
    rows = [{"id": f"t{i}", "input": f"ticket {i}", "expected": "Refund of $10 sent."}
            for i in range(12)]
    return write_repo(root, config, rows, prompt=PROMPT + "\n")


def _migrate(capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> tuple[int, str]:
    code = main(["migrate", "--suite", "s", "--to", "openai/new-model", "--optimizer",
                 "openai/optimizer", "--pricing", "1,1", "--repo", str(root), *extra])
    out, err = capsys.readouterr()
    return code, out + err


def test_a_migration_improves_the_holdout_and_writes_the_prompt_and_diff(
        llm: FakeLLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    llm.setup({"rules": RULES})
    root = _repo(tmp_path / "r", llm.url)
    code, text = _migrate(capsys, root, "--budget-usd", "1", "--seed", "3")
    assert code == EXIT_OK, text
    assert "Splits: 6 train, 3 validation, 3 holdout examples." in text
    assert "| rewrite 2 (chosen) | 100% | 100% |" in text and "| current | 0% | 0% |" in text
    assert ("current model and prompt 0%, openai/new-model with rewrite 2 100% (difference "
            "+100.0%") in text
    assert "3 fixed, 0 broken; McNemar one-sided p = 0.1250 for a gain" in text
    assert "1 rewrite(s) of the optimiser dropped" in text
    out = root / ".llmgate/migrate/s"
    assert (out / "p.txt").read_text() == WINNER + "\n"
    diff = (out / "migration.diff").read_text()
    assert f"-{PROMPT}\n+{WINNER}\n" in diff
    assert "--- a/.llmgate.yml\n+++ b/.llmgate.yml\n" in diff and "+    target: {model: " \
        "openai/new-model" in diff
    assert (root / "prompts/p.txt").read_text() == PROMPT + "\n"  # the tree is left alone
    calls = len(llm.calls())
    spent = next(line for line in text.splitlines() if line.startswith("Model calls:"))
    assert spent.startswith(f"Model calls: {calls} provider calls")
    llm.reset()  # the same seed gives the same migration
    llm.setup({"rules": RULES})
    again = _repo(tmp_path / "again", llm.url)
    assert _migrate(capsys, again, "--budget-usd", "1", "--seed", "3")[0] == EXIT_OK
    assert (again / ".llmgate/migrate/s/migration.diff").read_text() == diff


@pytest.mark.parametrize(("settings", "extra"), [
    ("concurrency: 4", ["--budget-usd", "0.000001"]),
    ("concurrency: 4, max_cost_usd: 0.000001", []),  # the config's limit bounds it too
    ("concurrency: 4, max_cost_usd: 0.000001", ["--budget-usd", "5"]),  # the stricter holds
])
def test_a_migration_over_its_budget_sends_nothing(
        llm: FakeLLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        settings: str, extra: list[str]) -> None:
    llm.setup({"rules": RULES})
    root = _repo(tmp_path / "r", llm.url, settings)
    code, text = _migrate(capsys, root, *extra)
    assert code == EXIT_BUDGET
    assert "refused: the estimate $" in text and "exceeds the budget $0.0000" in text
    assert llm.calls() == []
    assert not (root / ".llmgate/migrate/s/migration.diff").exists()


@pytest.mark.parametrize(("extra", "says"), [
    (["--budget-usd", "-1"], "--budget-usd must be a positive number"),
    (["--budget-usd", "nan"], "--budget-usd must be a positive number"),
    (["--rewrites", "99"], "--rewrites must be between 0 and 10"),
    (["--pricing", "1"], "--pricing must be IN,OUT"),
    (["--suite", "nope"], "--suite nope: no such suite in .llmgate.yml (its suites: s)"),
])
def test_bad_arguments_are_clear_errors(llm: FakeLLMServer, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str], extra: list[str],
                                        says: str) -> None:
    root = _repo(tmp_path / "r", llm.url)
    code, text = _migrate(capsys, root, *extra)
    assert code == EXIT_CONFIG_ERROR and says in text
    assert llm.calls() == []


def test_a_new_model_without_a_price_is_refused_under_a_budget(
        llm: FakeLLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _repo(tmp_path / "r", llm.url)
    code = main(["migrate", "--suite", "s", "--to", "openai/new-model", "--budget-usd", "1",
                 "--repo", str(root)])
    text = "".join(capsys.readouterr())
    assert code == EXIT_CONFIG_ERROR and "openai/new-model has no known price" in text
    assert llm.calls() == []


def test_a_migration_stops_when_its_budget_is_spent_and_writes_nothing(
        llm: FakeLLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the new model bills a million prompt tokens a call: far above the estimate, so the
    # budget, not the estimate, ends the migration after its first calls
    costly = {"model": "new-model", "match": "", "reply": "Refund sent.",
              "usage": {"prompt_tokens": 1_000_000, "completion_tokens": 1}}
    llm.setup({"rules": [RULES[0], costly, *RULES[1:]]})
    root = _repo(tmp_path / "r", llm.url)
    code, text = _migrate(capsys, root, "--budget-usd", "1")
    assert code == EXIT_BUDGET
    assert "Stopped: budget exceeded: $" in text and "nothing written" in text
    assert len(llm.calls()) <= 4  # the calls in flight when the limit was reached (concurrency)
    assert not (root / ".llmgate/migrate/s/migration.diff").exists()
