"""Tests of `worker.evals.run.engine`: a real repo in tmp_path, real target processes."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from worker.errors import ConfigError
from worker.evals.config.load import parse_config
from worker.evals.run.engine import run_config
from worker.evals.run.runner import RunState, run_suite
from worker.evals.score.scoring import NOT_CHECKED, Item, score_items
from worker.evals.types import AssertionSpec, Example, ExampleResult, Settings, TargetOutput

BOT = """\
import json, sys, time, os
doc = json.load(open(sys.argv[1]))
text = doc["input"]
os.makedirs("log", exist_ok=True)
start = time.monotonic()
time.sleep(doc["vars"].get("sleep", 0))
with open(os.path.join("log", doc["id"]), "w") as f:
    f.write(f"{start} {time.monotonic()}")
if text == "crash":
    sys.exit("model unreachable")
answers = {"refund please": "billing", "where is it": "shipping", "hi": "Billing"}
json.dump({"output": answers.get(text, "unknown"), "cost": 0.001}, open(sys.argv[2], "w"))
"""

DATASET = [
    {"id": "r1", "input": "refund please", "expected": "billing"},
    {"id": "s1", "input": "where is it", "expected": "billing"},
    {"id": "c1", "input": "crash", "expected": "billing"},
    {"id": "h1", "input": "hi", "expected": "billing",
     "assert": [{"type": "regex", "pattern": "^B"}]},
]


def config_text(dataset: str = "evals/d.jsonl", concurrency: int = 4) -> str:
    python = shlex.quote(sys.executable)
    return f"""\
version: 1
settings: {{concurrency: {concurrency}, timeout: 20}}
suites:
  - name: tickets
    dataset: {dataset}
    target: {{command: "{python} bot.py {{input_file}} {{output_file}}"}}
    assertions:
      - type: equals
        ignore_case: true
    gate: {{pass_rate: {{min: 0.5}}}}
  - name: again
    dataset: {dataset}
    target: {{command: "{python} bot.py {{input_file}} {{output_file}}"}}
"""


@pytest.fixture()
def repo(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
         monkeypatch: pytest.MonkeyPatch) -> Path:
    # targets run in a copy of the checkout (worker/security/target_view.py): the folder
    # they log to is outside it, linked from it and made writable
    log = tmp_path_factory.mktemp("log")
    (tmp_path / "log").symlink_to(log)
    monkeypatch.setenv("LLMGATE_SANDBOX_WRITE_PATHS", str(log))
    (tmp_path / "bot.py").write_text(BOT)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "d.jsonl").write_text(
        "\n".join(json.dumps(row) for row in DATASET) + "\n")
    return tmp_path


async def test_run_config_runs_every_suite_in_order(repo: Path) -> None:
    run = await run_config(parse_config(config_text()), repo, sha="a" * 40)
    assert run.sha == "a" * 40
    assert list(run.suites) == ["tickets", "again"]
    tickets = run.suites["tickets"]
    assert tickets.dataset == "evals/d.jsonl"
    assert [(e.id, e.line, e.passed, e.errored) for e in tickets.examples] == [
        ("r1", 1, True, False), ("s1", 2, False, False),
        ("c1", 3, False, True), ("h1", 4, True, False)]
    crashed = tickets.examples[2]
    assert crashed.output is None
    assert crashed.error is not None and "model unreachable" in crashed.error
    assert [a.message for a in crashed.assertions] == [NOT_CHECKED]
    assert [a.type for a in tickets.examples[3].assertions] == ["equals", "regex"]
    assert tickets.examples[0].cost_usd == pytest.approx(0.001)
    assert {k: tickets.metrics[k] for k in ("pass_rate", "error_rate",
                                           "assertion.equals.pass_rate",
                                           "assertion.regex.pass_rate")} == {
        "pass_rate": 0.5, "error_rate": 0.25,
        "assertion.equals.pass_rate": 0.5, "assertion.regex.pass_rate": 1.0}
    # The second suite has no suite assertions: only h1's regex, and the crash, decide.
    again = run.suites["again"]
    assert [e.passed for e in again.examples] == [True, True, False, True]


async def test_concurrency_is_bounded(repo: Path) -> None:
    rows = [{"id": f"e{i}", "input": "hi", "vars": {"sleep": 1.5}} for i in range(4)]
    (repo / "evals" / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    suite = parse_config(config_text(concurrency=2)).suites[1]
    result = await run_suite(suite, repo, Settings(20.0, 2))
    assert all(e.passed for e in result.examples)
    spans = [tuple(map(float, (repo / "log" / f"e{i}").read_text().split())) for i in range(4)]
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most == 2


async def test_dataset_errors_propagate_before_any_command_runs(repo: Path) -> None:
    (repo / "evals" / "d.jsonl").write_text('{"input": "hi"}\n{"input": oops}\n')
    with pytest.raises(ConfigError) as info:
        await run_config(parse_config(config_text()), repo)
    assert (info.value.path, info.value.line) == ("evals/d.jsonl", 2)
    assert not any((repo / "log").iterdir())


async def test_missing_dataset_points_at_the_suite_in_the_config(repo: Path) -> None:
    config = parse_config(config_text(dataset="evals/none.jsonl"))
    with pytest.raises(ConfigError) as info:
        await run_config(config, repo)
    # the missing file is not in the diff: the annotation goes on the suite's config line
    assert (info.value.path, info.value.line) == (".llmgate.yml", config.suites[0].line)
    assert "evals/none.jsonl" in info.value.message


async def score_example(specs: list[AssertionSpec], example: Example,
                        output: TargetOutput) -> ExampleResult:
    """Score one target output as a run does (worker/evals/score/scoring.py), no model calls."""
    settings = Settings(20.0, 1)
    [result] = await score_items(specs, [Item(example, output)], Path("."), settings,
                                 RunState(settings).caller, "evals/d.jsonl")
    return result


async def test_score_example_combines_suite_and_example_assertions() -> None:
    example = Example("x", 9, "in", "Yes", assertions=(AssertionSpec("contains", {"value": "no"}),))
    result = await score_example([AssertionSpec("equals")], example,
                                 TargetOutput("yes", latency_ms=12.5, cost_usd=0.2))
    assert (result.passed, result.errored, result.output, result.expected) == (
        False, False, "yes", "Yes")
    assert [(a.type, a.passed) for a in result.assertions] == [
        ("equals", False), ("contains", False)]
    assert (result.latency_ms, result.cost_usd, result.line) == (12.5, 0.2, 9)


async def test_score_example_without_assertions_passes_on_a_clean_run() -> None:
    result = await score_example([], Example("x", 1, "in"), TargetOutput("anything"))
    assert result.passed and not result.errored
