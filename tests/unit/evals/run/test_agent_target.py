"""Agents: ``tools`` in the config, tool implementations, and the step loop against the fake
provider over real HTTP (litellm)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.fakes.fake_llm import running_fake_llm
from worker.errors import ConfigError
from worker.evals.config.load import parse_config
from worker.evals.config.prompts import load_prompt
from worker.evals.llm_types import Endpoint, ModelTarget, ToolCall, ToolSpec
from worker.evals.run.agent_target import run_agent
from worker.evals.run.runner import RunState
from worker.evals.run.tools import call_tool
from worker.evals.types import Example, Settings

TOOL = "{name: lookup, parameters: {type: object}, results: [{arguments: {id: A1}, result: 5}]}"


def config(tools: str, extra: str = "") -> str:
    return ("version: 1\nsuites:\n  - name: s\n    dataset: d.jsonl\n"
            f"    target: {{model: openai/m, prompt: p.txt, tools: {tools}{extra}}}\n")


def test_tools_and_max_steps_parse_into_the_model_target():
    target = parse_config(config(f"[{TOOL}]", ", max_steps: 3")).suites[0].target
    assert isinstance(target, ModelTarget)
    assert target.max_steps == 3
    assert target.tools == (ToolSpec("lookup", "", {"type": "object"}, None,
                                     (({"id": "A1"}, 5),), None, False, 5),)
    default = parse_config(config(f"[{TOOL}]")).suites[0].target
    assert isinstance(default, ModelTarget) and default.max_steps == 8


@pytest.mark.parametrize(("tools", "extra", "words"), [
    ("[]", "", "`tools` must be a list of 1 to 64 tools"),
    ("[{name: 'a b', result: 1}]", "", "`name` must be 1 to 64 letters"),
    ("[{name: a}]", "", "needs `command`, or a fixed table"),
    ("[{name: a, command: x, result: 1}]", "", "needs `command`, or a fixed table"),
    ("[{name: a, result: 1}, {name: a, result: 2}]", "", "the name 'a' is given twice"),
    ("[{name: a, result: 1, parameters: {type: nope}}]", "", "invalid JSON Schema"),
    ("[{name: a, results: [{arguments: {}}]}]", "", "`results` must be a list"),
    ("[{name: a, result: 1, colour: red}]", "", "unknown key 'colour'"),
    (f"[{TOOL}]", ", max_steps: 0", "`max_steps` must be an integer from 1 to 50"),
])
def test_malformed_tools_are_config_errors_on_the_target_line(tools, extra, words):
    with pytest.raises(ConfigError, match=words) as caught:
        parse_config(config(tools, extra))
    assert caught.value.line == 5


def answer(tools: tuple[ToolSpec, ...], name: str, arguments: str,
           cwd: Path = Path(".")) -> ToolCall:
    return asyncio.run(call_tool(tools, name, arguments, "ex1", cwd, Settings(timeout_s=20)))


def test_a_fixed_table_answers_equal_arguments_and_else_its_default_or_an_error():
    table = ToolSpec("t", results=(({"id": "A1", "n": 1}, "one"),))
    with_default = ToolSpec("t", results=table.results, default=None, has_default=True)
    assert answer((table,), "t", '{"n": 1.0, "id": "A1"}') == ToolCall(
        "t", {"n": 1.0, "id": "A1"}, "one")
    assert answer((table,), "t", '{"id": "B2"}').error == "no result for these arguments"
    assert answer((with_default,), "t", '{"id": "B2"}') == ToolCall("t", {"id": "B2"}, None)
    assert answer((table,), "nope", "{}").error == "no tool named 'nope'"
    assert answer((table,), "t", "{not json").error == "the arguments are not JSON"


@pytest.mark.slow
def test_a_command_tool_gets_the_call_and_its_result_or_error_goes_back(tmp_path):
    script = tmp_path / "tool.py"
    script.write_text(
        "import json, sys\n"
        "call = json.load(open(sys.argv[1]))\n"
        "out = {'error': 'no such order'} if call['arguments']['id'] == 'X' else "
        "{'result': {'echo': call['arguments'], 'name': call['name'], 'id': call['id']}}\n"
        "json.dump(out, open(sys.argv[2], 'w'))\n")
    tool = ToolSpec("t", command=f"{sys.executable} tool.py {{input_file}} {{output_file}}")
    assert answer((tool,), "t", '{"id": "A1"}', tmp_path).result == {
        "echo": {"id": "A1"}, "name": "t", "id": "ex1"}
    assert answer((tool,), "t", '{"id": "X"}', tmp_path).error == "no such order"
    broken = ToolSpec("t", command=f"{sys.executable} -c 'raise SystemExit(3)'")
    assert "exit" in (answer((broken,), "t", "{}", tmp_path).error or "").lower()


def agent_run(tmp_path: Path, rules: list[dict[str, object]], max_steps: int = 8):
    (tmp_path / "p.txt").write_text("Q: {{ input }}")
    settings = Settings(timeout_s=20, cache=False)
    with running_fake_llm({"rules": rules}) as llm:
        target = ModelTarget(Endpoint("openai/m", api_base=llm.url), "p.txt",
                             tools=(ToolSpec("lookup", results=(({"id": "A1"}, {"v": 7}),)),),
                             max_steps=max_steps)

        async def go():
            return await run_agent(target, load_prompt(tmp_path, "p.txt"),
                                   Example("e", 1, "A1?"), RunState(settings).caller,
                                   tmp_path, settings, use_cache=False)

        return asyncio.run(go()), llm.calls("chat")


CALL = {"match": "A1?", "tool_calls": [{"name": "lookup", "arguments": {"id": "A1"}}]}


@pytest.mark.slow
def test_the_agent_calls_the_tool_then_answers_with_the_trace(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    final = {"match": '{"v": 7}', "reply": "It is 7."}
    out, calls = agent_run(tmp_path, [final, CALL])
    assert (out.output, out.error) == ("It is 7.", None)
    assert out.trace is not None
    assert out.trace.tool_calls == (ToolCall("lookup", {"id": "A1"}, {"v": 7}),)
    assert (out.trace.steps, out.trace.turns) == (2, 1)
    assert out.trace.tokens == out.usage["input"] + out.usage["output"] > 0
    assert len(calls) == 2
    assert calls[0]["params"]["tools"][0]["function"]["name"] == "lookup"
    assistant, tool = calls[1]["messages"][-2:]
    assert assistant["tool_calls"][0]["function"] == {"name": "lookup",
                                                      "arguments": '{"id": "A1"}'}
    assert tool == {"role": "tool", "tool_call_id": assistant["tool_calls"][0]["id"],
                    "content": '{"v": 7}'}


@pytest.mark.slow
def test_an_agent_still_calling_tools_at_max_steps_fails_with_its_trace(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    out, calls = agent_run(tmp_path, [CALL], max_steps=3)
    assert out.output is None and out.error_kind == "target"
    assert out.error == ("the agent gave no answer within max_steps 3 (it still called tools "
                         "at the last step)")
    assert len(calls) == 3 and out.trace is not None and out.trace.steps == 3
    assert len(out.trace.tool_calls) == 3
    assert json.loads(calls[2]["messages"][-1]["content"]) == {"v": 7}


def test_a_command_targets_trace_rides_on_its_output_and_a_bad_one_is_named():
    from worker.evals.score.outputs import OutputError, parse_output_document
    from worker.evals.types import Trace

    out = parse_output_document({"output": "hi", "trace": {
        "tool_calls": [{"name": "a", "arguments": "{}"}], "steps": 1}}, 5.0)
    assert out.trace == Trace((ToolCall("a", {}),), 1)
    assert parse_output_document({"output": "hi"}, 5.0).trace is None
    with pytest.raises(OutputError, match='"trace.turns" must be a non-negative integer'):
        parse_output_document({"output": "hi", "trace": {"turns": "2"}}, 5.0)


@pytest.mark.slow
def test_the_trajectory_judge_sees_the_calls_and_passes_or_fails_on_them(monkeypatch):
    from worker.evals.score.scoring import Item, score_items
    from worker.evals.types import AssertionSpec, TargetOutput, Trace

    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    rules = [{"match": "1. cancel_order(", "reply": "It cancelled. VERDICT: FAIL"},
             {"match": "<trajectory>", "reply": "VERDICT: PASS"}]
    with running_fake_llm({"rules": rules}) as llm:
        spec = AssertionSpec("trajectory_judge", {"rubric": "Never cancel.", "model": "openai/j",
                                                  "api_base": llm.url}, 4)
        good = TargetOutput("ok", trace=Trace((ToolCall("lookup", {"id": 1}, 2),), 2))
        bad = TargetOutput("ok", trace=Trace((ToolCall("cancel_order", {"id": 1}, True),), 2))
        none = TargetOutput("ok")
        settings = Settings(timeout_s=20, cache=False)
        items = [Item(Example(n, i, "q"), o) for i, (n, o) in
                 enumerate((("good", good), ("bad", bad), ("none", none)), start=1)]
        results = asyncio.run(score_items([spec], items, Path("."), settings,
                                          RunState(settings).caller, "d.jsonl"))
        calls = llm.calls("chat")
    assert [r.passed for r in results] == [True, False, False]
    assert results[2].assertions[0].message.startswith("the target reported no trace")
    assert len(calls) == 2  # no judge call without a trace
    prompt = next(c for c in calls if "lookup" in c["messages"][1]["content"])
    assert '1. lookup({"id": 1}) -> result: 2\nsteps: 2' in prompt["messages"][1]["content"]
    assert results[0].trace == good.trace


TWO = ("[{name: lookup, result: 1}, {name: refund, result: 2}]")


@pytest.mark.parametrize(("assertion", "error"), [
    ("{type: tools_not_called, tools: [nosuch]}",
     "assertion `tools_not_called`: unknown tool nosuch; the target offers: lookup, refund"),
    ("{type: tools_called, tools: [lookup, refnud]}",
     "assertion `tools_called`: unknown tool refnud; the target offers: lookup, refund"),
    ("{type: max_tool_calls, max: 2, tool: lokup}",
     "assertion `max_tool_calls`: unknown tool lokup; the target offers: lookup, refund"),
    ("{type: tool_arguments, schemas: {nosuchtool: {type: object}}}",
     "assertion `tool_arguments`: unknown tool nosuchtool; the target offers: lookup, refund"),
    ("{type: trajectory, steps: [lookup, '*', refnd_*]}",
     "assertion `trajectory`: unknown tool refnd_* (no offered tool matches it); the target "
     "offers: lookup, refund"),
])
def test_an_agent_assertion_naming_a_tool_the_target_lacks_is_a_config_error(assertion, error):
    text = config(TWO) + f"    assertions:\n      - {assertion}\n"
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert (caught.value.line, caught.value.message) == (7, error)


def test_offered_tools_globs_and_command_targets_pass_the_tool_name_check():
    ok = ("      - {type: trajectory, steps: [look*, '?', '*']}\n"
          "      - {type: tools_called, tools: [refund]}\n")
    assert len(parse_config(config(TWO) + "    assertions:\n" + ok).suites[0].assertions) == 2
    command = ("version: 1\nsuites:\n  - name: s\n    dataset: d.jsonl\n    target: {command: "
               "'x {input_file} {output_file}'}\n    assertions:\n"
               "      - {type: tools_called, tools: [anything]}\n")
    assert parse_config(command).suites[0].assertions[0].params == {"tools": ["anything"]}


def test_a_dataset_assertion_naming_a_missing_tool_is_an_error_on_its_dataset_line():
    from worker.evals.config.consistency import parse_suite_dataset

    suite = parse_config(config(TWO)).suites[0]
    rows = ('{"id": "a", "input": "x"}\n'
            '{"id": "b", "input": "y", "assert": [{"type": "tools_called", "tools": ["nope"]}]}\n')
    with pytest.raises(ConfigError) as caught:
        parse_suite_dataset(rows, suite)
    assert (caught.value.path, caught.value.line, caught.value.message) == (
        "d.jsonl", 2, "assertion `tools_called`: unknown tool nope; the target offers: lookup, "
        "refund")


@pytest.mark.parametrize(("target", "line", "error"), [
    ("{model: openai/m, prompt: p.txt, max_steps: 3}", 5,
     "`max_steps` limits the model calls of an agent: give the target `tools` too, or remove "
     "`max_steps`"),
    ("{model: openai/m, prompt: p.txt, tools: [{name: a, results: [{arguments: [1], "
     "result: 2}]}]}", 5,
     "tool 'a': `results` row 1: `arguments` must be a mapping (the call's arguments object), "
     "got list"),
])
def test_max_steps_without_tools_and_non_object_arguments_are_config_errors(target, line, error):
    text = f"version: 1\nsuites:\n  - name: s\n    dataset: d.jsonl\n    target: {target}\n"
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert (caught.value.line, caught.value.message) == (line, error)
