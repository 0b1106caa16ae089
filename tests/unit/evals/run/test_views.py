"""Tests of `worker.evals.run.views`: what a run hides from its targets, and where they run."""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from pathlib import Path

import pytest

from worker.evals.config.load import parse_config
from worker.evals.llm_types import Endpoint, ModelTarget, ToolSpec
from worker.evals.run.engine import run_config
from worker.evals.run.views import TargetViews, hidden_paths, runs_commands
from worker.evals.types import (
    AssertionSpec,
    CommandTarget,
    Config,
    JudgeRules,
    MetricSpec,
    Settings,
    SuiteConfig,
)

PYTHON = shlex.quote(sys.executable)


@pytest.fixture(autouse=True)
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Views go to a folder of this test's (tests running beside it make theirs in /tmp)."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))


def views_left() -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob("llmgate-view-*"))


def test_hidden_paths_are_every_file_the_contract_names(tmp_path: Path) -> None:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "d.jsonl").write_text(json.dumps(
        {"id": "a", "input": "x", "assert": [{"type": "json_schema",
                                               "file": "schemas/example.json"}]}) + "\n")
    suite = SuiteConfig(
        "s", "evals/d.jsonl", CommandTarget("python3 bot.py {input_file} {output_file}"),
        (AssertionSpec("json_schema", {"file": "schemas/out.json"}),
         AssertionSpec("python", {"function": "checks/grade.py:grade"}),
         AssertionSpec("equals", {})),
        {}, traps="evals/traps.jsonl", judge=JudgeRules("evals/labels.jsonl"),
        metrics=(MetricSpec("m", function="checks/metric.py:score"), MetricSpec("e")))
    other = SuiteConfig("t", "evals/missing.jsonl", suite.target, (), {})
    config = Config(1, (suite, other), Settings(), path="sub/.llmgate.yml")
    assert hidden_paths([config], tmp_path) == (
        ".llmgate.yml", "checks/grade.py", "checks/metric.py", "evals/d.jsonl",
        "evals/labels.jsonl", "evals/labels.snapshot.json", "evals/missing.jsonl",
        "evals/traps.jsonl", "schemas/example.json", "schemas/out.json", "sub/.llmgate.yml")


def test_runs_commands() -> None:
    model = ModelTarget(Endpoint("openai/m"), "p.txt")
    assert runs_commands(CommandTarget("x"))
    assert not runs_commands(model)
    tool = ToolSpec("t", command="python3 tool.py {input_file} {output_file}")
    assert runs_commands(ModelTarget(Endpoint("openai/m"), "p.txt", tools=(tool,)))
    assert not runs_commands(ModelTarget(Endpoint("openai/m"), "p.txt",
                                         tools=(ToolSpec("t", default={"ok": True},
                                                         has_default=True),)))


async def test_one_view_per_checkout_until_closed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "bot.py").write_text("")
    (repo / "d.jsonl").write_text("{}\n")
    views = TargetViews(["d.jsonl"])
    first = await views.cwd(repo, working_tree=False)
    assert await views.cwd(repo, working_tree=False) == first
    assert sorted(p.name for p in first.iterdir()) == ["bot.py"] and len(views_left()) == 1
    views.close()
    assert not first.exists() and views_left() == []


async def test_a_run_answers_in_a_view_and_removes_it(tmp_path: Path) -> None:
    """The target sees its files but neither ``.git`` nor the dataset and config; the view is
    gone after the run."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "evals").mkdir()
    (repo / "evals" / "d.jsonl").write_text('{"id": "a", "input": "x", "expected": "y"}\n')
    (repo / "bot.py").write_text(
        "import json, os, sys\n"
        "seen = sorted(os.path.join(d, f)[2:] for d, _, fs in os.walk('.') for f in fs)\n"
        "json.dump({'output': seen}, open(sys.argv[2], 'w'))\n")
    config = parse_config(
        "version: 1\nsuites:\n  - name: s\n    dataset: evals/d.jsonl\n"
        f"    target: {{command: \"{PYTHON} bot.py {{input_file}} {{output_file}}\"}}\n")
    run = await run_config(config, repo)
    [example] = run.suites["s"].examples
    assert example.output == ["bot.py"]
    assert views_left() == []
