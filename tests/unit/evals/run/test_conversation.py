"""Multi-turn examples: the target is called turn by turn with the conversation so far (a model
over real HTTP through litellm to the fake provider, a command target with ``history``), each
turn is scored, and the turns merge into one result per example."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.fakes.fake_llm import running_fake_llm
from worker.errors import ConfigError
from worker.evals.config.load import parse_config
from worker.evals.run.conversation import each_turn, merge_turns, turn_example
from worker.evals.run.runner import RunState, run_suite
from worker.evals.types import (
    AssertionResult,
    Example,
    ExampleResult,
    TargetOutput,
    Turn,
)

CONTAINS = "{type: contains, value: %s}"
TALK = {"id": "c1", "turns": [
    {"input": "to Oslo", "assert": [{"type": "contains", "value": "Oslo"}]},
    {"input": "Monday", "expected": "Oslo on Monday", "assert": [{"type": "equals"}]},
    {"input": "upgrade"}]}


def write_suite(root: Path, target: str, rows: list[dict[str, object]], extra: str = "") -> None:
    (root / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / ".llmgate.yml").write_text(
        "version: 1\nsettings: {timeout: 20, cache: false}\nsuites:\n  - name: s\n"
        f"    dataset: d.jsonl\n    target: {target}\n"
        "    assertions: [{type: not_contains, value: NOPE}]\n" + extra)


def run(root: Path):
    config = parse_config((root / ".llmgate.yml").read_text())
    [suite] = config.suites
    return asyncio.run(run_suite(suite, root, config.settings, RunState(config.settings)))


@pytest.mark.slow
def test_a_model_target_gets_the_conversation_so_far_at_each_turn(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    (tmp_path / "p.yaml").write_text('- {role: system, content: "Be brief."}\n'
                                     '- {role: user, content: "Q: {{ input }}"}\n')
    rules = [{"match": ["Q: upgrade"], "reply": "Upgraded Oslo"},
             {"match": ["Q: Monday"], "reply": "Oslo on Monday"},
             {"match": ["Q: to Oslo"], "reply": "Flying to Oslo"}]
    with running_fake_llm({"rules": rules}) as llm:
        write_suite(tmp_path, f'{{model: openai/m, prompt: p.yaml, api_base: "{llm.url}"}}',
                    [TALK])
        result = run(tmp_path)
        chats = [c["messages"] for c in llm.calls("chat")]
    assert len(chats) == 3
    system = {"role": "system", "content": "Be brief."}
    assert chats[0] == [system, {"role": "user", "content": "Q: to Oslo"}]
    assert chats[2] == [system, {"role": "user", "content": "Q: to Oslo"},
                        {"role": "assistant", "content": "Flying to Oslo"},
                        {"role": "user", "content": "Q: Monday"},
                        {"role": "assistant", "content": "Oslo on Monday"},
                        {"role": "user", "content": "Q: upgrade"}]
    [example] = result.examples
    assert example.passed and example.line == 1
    assert example.output == ["Flying to Oslo", "Oslo on Monday", "Upgraded Oslo"]
    # the suite's assertion on every turn, and each turn's own: 3 + 1 + 1
    assert [(a.type, a.details["turn"]) for a in example.assertions] == [
        ("not_contains", 1), ("contains", 1), ("not_contains", 2), ("equals", 2),
        ("not_contains", 3)]
    assert result.metrics["pass_rate"] == 1.0


BOT = """import json, sys
doc = json.load(open(sys.argv[1]))
json.dump({"output": {"turn": doc.get("turn"), "history": doc.get("history"),
                      "input": doc["input"]}} if doc["input"] != "boom" else
          {"output": "NOPE" if doc.get("turn") == 2 else "fine"}, open(sys.argv[2], "w"))
if doc["input"] == "crash":
    sys.exit("down")
"""


@pytest.mark.slow
def test_a_command_target_gets_the_turn_and_history_and_a_failed_turn_names_itself(tmp_path):
    (tmp_path / "bot.py").write_text(BOT)
    command = shlex.quote(sys.executable) + " bot.py {input_file} {output_file}"
    rows = [{"id": "a", "turns": [{"input": "x"}, {"input": {"y": 1}}]},
            {"id": "b", "turns": [{"input": "first"}, {"input": "crash"}, {"input": "never"}]},
            {"id": "c", "input": "plain"}]
    write_suite(tmp_path, json.dumps({"command": command}), rows)
    result = run(tmp_path)
    a, b, c = result.examples
    assert a.passed
    assert a.output[1] == {"turn": 2, "input": {"y": 1}, "history": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": {"turn": 1, "history": [], "input": "x"}}]}
    assert c.output == {"turn": None, "history": None, "input": "plain"}
    assert (b.passed, b.errored, b.error_kind) == (False, True, "target")
    assert b.error is not None and b.error.startswith("turn 2: ")
    assert len(b.output) == 2  # the conversation stopped at its failed turn
    assert result.metrics["pass_rate"] == pytest.approx(2 / 3)


@pytest.mark.slow
def test_a_failed_assertion_at_turn_two_fails_the_example_with_the_turn_named(tmp_path):
    (tmp_path / "bot.py").write_text(BOT)
    command = shlex.quote(sys.executable) + " bot.py {input_file} {output_file}"
    write_suite(tmp_path, json.dumps({"command": command}),
                [{"id": "a", "turns": [{"input": "boom"}, {"input": "boom"}]}])
    [a] = run(tmp_path).examples
    assert (a.passed, a.errored, a.output) == (False, False, ["fine", "NOPE"])
    [failed] = [x for x in a.assertions if not x.passed]
    assert failed.message.startswith("turn 2: ") and failed.details["turn"] == 2


def test_a_batch_command_target_refuses_conversations(tmp_path):
    write_suite(tmp_path, '{command: "true {input_file} {output_file}", batch: true}', [TALK])
    with pytest.raises(ConfigError, match="has `turns`"):
        run(tmp_path)


def example() -> Example:
    return Example("c", 4, ["a", "b"], [None, "B"], turns=(Turn("a"), Turn("b", "B")))


def test_a_turn_is_an_example_with_that_turns_input_expected_and_assertions():
    turn = turn_example(example(), 2)
    assert (turn.id, turn.line, turn.input, turn.expected, turn.turns) == ("c", 4, "b", "B", ())
    assert [e.id for e in each_turn([example(), Example("p", 5, "x")])] == [
        "c#turn1", "c#turn2", "p"]
    with pytest.raises(IndexError):
        turn_example(example(), 3)


def test_merged_turns_pass_only_when_every_turn_was_answered_and_passed():
    ok = AssertionResult("equals", True, 1.0)
    bad = AssertionResult("equals", False, 0.0, "expected B")
    turns = [ExampleResult("c", 4, True, False, "A", None, assertions=(ok,), latency_ms=2),
             ExampleResult("c", 4, False, False, "x", "B", assertions=(bad,), latency_ms=3)]
    answered = TargetOutput("x", latency_ms=5, cost_usd=0.25,
                            turns=(TargetOutput("A"), TargetOutput("x")))
    merged = merge_turns(example(), turns, answered)
    assert (merged.passed, merged.output, merged.expected, merged.latency_ms,
            merged.cost_usd) == (False, ["A", "x"], [None, "B"], 5, 0.25)
    assert [a.message for a in merged.assertions] == ["turn 1", "turn 2: expected B"]
    assert merge_turns(example(), turns[:1], answered).passed is False  # turn 2 never answered
