"""The shipped example: the support bot, its dataset and the git repository build_repo.py makes."""

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from tests.unit.examples.example_support import load_module

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "support-bot"
BRANCHES = ("main", "pr/regress", "pr/fix")
LABELS = {"billing", "bug", "account", "feature_request", "shipping", "other"}
#: The designed outcome of each branch: tickets passing out of 46.
PASSING = {"main": 44, "pr/regress": 33, "pr/fix": 45}


def _build(dest: Path) -> dict[str, str]:
    done = subprocess.run([sys.executable, str(EXAMPLE / "build_repo.py"), str(dest)],
                          capture_output=True, text=True, check=True)
    shas: dict[str, str] = json.loads(done.stdout)
    return shas


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


def _load_bot(path: Path, name: str) -> ModuleType:
    return load_module(path, name)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("support-bot") / "repo"
    return repo, _build(repo)


def test_build_is_reproducible_and_has_the_three_branches(
        built: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    repo, shas = built
    assert list(shas) == list(BRANCHES)
    assert _build(tmp_path / "again") == shas
    assert _git(repo, "rev-parse", "pr/fix^").strip() == shas["pr/regress"]
    assert _git(repo, "rev-parse", "pr/regress^").strip() == shas["main"]
    assert sorted(_git(repo, "ls-tree", "-r", "--name-only", "main").split()) == [
        ".llmgate.yml", "bot.py", "evals/tickets.jsonl", "triage_rules.txt"]
    again = subprocess.run([sys.executable, str(EXAMPLE / "build_repo.py"), str(repo)],
                           capture_output=True, text=True)
    assert again.returncode == 1 and "not an empty directory" in again.stderr


def test_pass_rates_are_the_designed_ones(built: tuple[Path, dict[str, str]],
                                          tmp_path: Path) -> None:
    repo, shas = built
    rates = {}
    for branch in BRANCHES:
        tree = tmp_path / branch.replace("/", "-")
        _git(repo, "worktree", "add", "-q", "--detach", str(tree), shas[branch])
        bot = _load_bot(tree / "bot.py", f"support_bot_{tree.name.replace('-', '_')}")
        rules = bot.load_rules()
        tickets = [json.loads(line) for line in (tree / "evals/tickets.jsonl").open()]
        passing = sum(bot.classify(t["input"], rules) == t["expected"] for t in tickets)
        assert (branch, passing, len(tickets)) == (branch, PASSING[branch], 46)
        rates[branch] = passing / len(tickets)
    assert rates["main"] >= 0.9
    assert rates["pr/regress"] < 0.80 and rates["main"] - rates["pr/regress"] > 0.05
    assert rates["pr/fix"] >= 0.80 and rates["main"] - rates["pr/fix"] <= 0.05


def test_dataset_is_varied_and_well_formed() -> None:
    tickets = [json.loads(line) for line in (EXAMPLE / "evals/tickets.jsonl").open()]
    assert len(tickets) >= 40
    assert len({t["id"] for t in tickets}) == len(tickets)
    assert len({t["input"] for t in tickets}) == len(tickets)
    counts = Counter(t["expected"] for t in tickets)
    assert set(counts) == LABELS and min(counts.values()) >= 5


def test_config_is_valid_and_gates_pass_rate() -> None:
    from worker.evals.config.load import load_config

    config = load_config(EXAMPLE)
    assert config is not None
    (suite,) = config.suites
    assert suite.dataset == "evals/tickets.jsonl"
    assert [(a.type, a.params) for a in suite.assertions] == [("equals", {"ignore_case": True})]
    rule = suite.gate["pass_rate"]
    assert (rule.min, rule.max_drop) == (0.80, 0.05)
    assert config.settings.env == ("SUPPORT_BOT_CALL_LOG",)


def test_bot_follows_the_command_target_protocol(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    env = {"PATH": os.environ["PATH"], "SUPPORT_BOT_CALL_LOG": str(log)}
    for n, text in enumerate(["I was charged twice, please refund me", "hello there"]):
        (tmp_path / "in.json").write_text(json.dumps({"id": f"x{n}", "input": text, "vars": {}}))
        subprocess.run([sys.executable, "bot.py", str(tmp_path / "in.json"),
                        str(tmp_path / f"out{n}.json")], cwd=EXAMPLE, env=env, check=True)
    outputs = [json.loads((tmp_path / f"out{n}.json").read_text()) for n in range(2)]
    assert outputs == [{"output": "billing"}, {"output": "other"}]
    assert log.read_text() == "x0\nx1\n"
    usage = subprocess.run([sys.executable, "bot.py"], cwd=EXAMPLE, capture_output=True,
                           text=True)
    assert usage.returncode == 2 and "usage" in usage.stderr


def test_bot_reports_a_malformed_rules_line(tmp_path: Path) -> None:
    bot = _load_bot(EXAMPLE / "bot.py", "support_bot_rules_check")
    rules = tmp_path / "triage_rules.txt"
    rules.write_text("# comment\nbilling: refund\nbug refund crash\n")
    with pytest.raises(ValueError, match=r"triage_rules.txt:3: expected 'label: keyword"):
        bot.load_rules(rules)


@pytest.mark.slow
def test_llmgate_fails_the_regressing_branch_and_calls_the_bot_per_example(
        built: tuple[Path, dict[str, str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from worker.cli.main import main as llmgate_main

    repo, shas = built
    log = tmp_path / "calls.log"
    log.write_text("")  # the target sandbox lets the bot append to it (it must exist)
    monkeypatch.setenv("SUPPORT_BOT_CALL_LOG", str(log))
    monkeypatch.setenv("LLMGATE_SANDBOX_WRITE_PATHS", str(log))
    out = tmp_path / "report.json"
    code = llmgate_main(["run", "--repo", str(repo), "--base", "main", "--head", "pr/regress",
                         "--format", "json", "--output", str(out)])
    doc = json.loads(out.read_text())
    assert (code, doc["conclusion"]) == (1, "failure")
    assert (doc["base_sha"], doc["head_sha"]) == (shas["main"], shas["pr/regress"])
    assert len(doc["regressions"]) == PASSING["main"] - PASSING["pr/regress"]
    assert len(log.read_text().splitlines()) == 2 * 46  # base and head, once per example
