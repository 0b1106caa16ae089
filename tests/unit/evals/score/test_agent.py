"""Agent traces, trace assertions and agent metrics against hand-computed values (pure)."""

from __future__ import annotations

import math

import pytest

from worker.errors import ConfigError
from worker.evals.score import agent
from worker.evals.score.assertions import validate_spec
from worker.evals.score.direction import LOWER_IS_BETTER
from worker.evals.score.example_values import example_value
from worker.evals.score.metrics import suite_metrics
from worker.evals.score.traces import TraceError, parse_trace
from worker.evals.score.trajectory_judge import trace_text
from worker.evals.types import AssertionSpec, ExampleResult, ToolCall, Trace


def trace(*names: str, steps: int | None = None, errors: tuple[int, ...] = (),
          args: dict[str, object] | None = None) -> Trace:
    calls = tuple(ToolCall(n, args if args is not None else {"q": "x"}, "ok",
                           "boom" if i in errors else None) for i, n in enumerate(names))
    return Trace(calls, steps)


def spec(kind: str, **params: object) -> AssertionSpec:
    s = AssertionSpec(kind, dict(params), 7)
    validate_spec(s, ".llmgate.yml")
    return s


CASES = [
    # (assertion, trace, passed, message part)
    (spec("tools_called", tools=["search"]), trace("search", "answer"), True, ""),
    (spec("tools_called", tools=["search", "book"]), trace("search"), False,
     "expected a call of book; called: search"),
    (spec("tools_called", tools=["a", "b"], order=True), trace("a", "x", "b"), True, ""),
    (spec("tools_called", tools=["a", "b"], order=True), trace("b", "a"), False,
     "in the order a > b; called: b > a"),
    (spec("tools_called", tools=["a", "a"], order=True), trace("a"), False, "order a > a"),
    (spec("tools_called", tools=["a"]), trace(), False, "called: none"),
    (spec("tools_not_called", tools=["delete"]), trace("search"), True, ""),
    (spec("tools_not_called", tools=["delete", "drop"]), trace("drop", "search", "drop"), False,
     "called forbidden tool drop"),
    (spec("max_tool_calls", max=2), trace("a", "b"), True, ""),
    (spec("max_tool_calls", max=2), trace("a", "b", "a"), False, "at most 2 tool calls, made 3"),
    (spec("max_tool_calls", max=1, tool="a"), trace("a", "b", "b"), True, ""),
    (spec("max_tool_calls", max=1, tool="a"), trace("a", "b", "a"), False,
     "at most 1 calls of a, made 2"),
    (spec("max_steps", max=3), trace("a", steps=3), True, ""),
    (spec("max_steps", max=3), trace("a", steps=4), False, "at most 3 steps, took 4"),
    (spec("max_steps", max=3), trace("a"), False, "no `steps`"),
    (spec("trajectory", steps=["search", "*", "answer"]), trace("search", "answer"), True, ""),
    (spec("trajectory", steps=["search", "*", "answer"]), trace("search", "x", "y", "answer"),
     True, ""),
    (spec("trajectory", steps=["search", "*", "answer"]), trace("search", "answer", "x"),
     False, "expected the calls search > * > answer; called: search > answer > x"),
    (spec("trajectory", steps=["?", "answer"]), trace("answer"), False, ""),
    (spec("trajectory", steps=["?", "answer"]), trace("lookup", "answer"), True, ""),
    (spec("trajectory", steps=["get_*", "*"]), trace("get_order"), True, ""),
    (spec("trajectory", steps=["get_*"]), trace("set_order"), False, ""),
    (spec("trajectory", steps=["*"]), trace(), True, ""),
    (spec("tool_arguments", schemas={"a": {"type": "object", "required": ["id"]}}),
     trace("a", "b", args={"id": 1}), True, ""),
    (spec("tool_arguments", schemas={"a": {"type": "object", "required": ["id"]}}),
     trace("b", "a", args={"q": 1}), False, "call 2 (a): arguments invalid at (root): 'id' is"),
    (spec("tool_arguments", schemas={"a": {"properties": {"n": {"type": "integer"}}}}),
     trace("a", args={"n": "2"}), False, "invalid at n: '2' is not of type 'integer'"),
    (spec("tool_arguments", schemas={"a": {"type": "object"}}), trace("b"), True, ""),
]


@pytest.mark.parametrize(("assertion", "given", "passed", "message"), CASES)
def test_each_trace_assertion_gives_the_hand_checked_verdict(assertion, given, passed, message):
    got, text = agent.check(assertion, given)
    assert got is passed
    assert message in text


@pytest.mark.parametrize("kind", agent.AGENT_TYPES)
def test_every_trace_assertion_fails_an_output_without_a_trace(kind):
    params = {"tools": ["a"], "max": 1, "schemas": {"a": {}}, "steps": ["a"]}
    s = AssertionSpec(kind, {k: params[k] for k in agent.PARAMS[kind] if k in params
                             and k != "tool"})
    assert agent.check(s, None) == (False, agent.NO_TRACE)


@pytest.mark.parametrize(("kind", "params", "message"), [
    ("tools_called", {}, "`tools` must be a non-empty list"),
    ("tools_called", {"tools": ["a"], "order": "yes"}, "`order` must be true or false"),
    ("tools_not_called", {"tools": []}, "`tools` must be a non-empty list"),
    ("max_tool_calls", {"max": -1}, "needs `max`, a non-negative integer"),
    ("max_steps", {"max": 2, "tool": "a"}, "unknown option 'tool'"),
    ("tool_arguments", {"schemas": {}}, "needs `schemas`"),
    ("tool_arguments", {"schemas": {"a": {"type": "nope"}}}, "invalid JSON Schema"),
    ("trajectory", {"steps": "a"}, "`steps` must be a non-empty list"),
    ("trajectory_judge", {}, "needs exactly one of `rubric` or `criteria`"),
])
def test_malformed_agent_assertions_are_config_errors_on_their_line(kind, params, message):
    with pytest.raises(ConfigError) as caught:
        validate_spec(AssertionSpec(kind, params, 12), ".llmgate.yml")
    assert caught.value.line == 12 and message in caught.value.message


def test_trace_in_llmgate_shape_is_read_with_json_text_arguments():
    got = parse_trace({"tool_calls": [
        {"name": "a", "arguments": '{"x": 1}', "result": 3},
        {"name": "b", "arguments": "not json", "error": "down"}],
        "steps": 2, "turns": 1, "tokens": 40, "cost": 0.5})
    assert got == Trace((ToolCall("a", {"x": 1}, 3), ToolCall("b", "not json", None, "down")),
                        2, 1, 40, 0.5)


def test_openai_tool_calls_and_messages_are_read_as_litellm_gives_them():
    openai_call = {"id": "c1", "type": "function",
                   "function": {"name": "lookup", "arguments": '{"id": "A1"}'}}
    assert parse_trace({"tool_calls": [openai_call]}) == Trace((ToolCall("lookup", {"id": "A1"}),))
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "tool_calls": [openai_call]},
                {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'},
                {"role": "assistant", "content": "It shipped."}]
    assert parse_trace({"messages": messages}) == Trace(
        (ToolCall("lookup", {"id": "A1"}, {"status": "shipped"}),), 2)


@pytest.mark.parametrize(("value", "message"), [
    ([], '"trace" must be an object'),
    ({"tool_calls": {}}, "must be a list"),
    ({"tool_calls": [{"arguments": {}}]}, "needs a `name`"),
    ({"steps": -1}, '"trace.steps" must be a non-negative integer'),
    ({"steps": True}, '"trace.steps" must be a non-negative integer'),
    ({"cost": float("nan")}, '"trace.cost" must be a non-negative number'),
    ({"messages": "x"}, "list of chat messages"),
])
def test_a_malformed_trace_is_refused_with_what_is_wrong(value, message):
    with pytest.raises(TraceError, match=message.replace("(", r"\(")):
        parse_trace(value)


def result(id_: str, t: Trace | None, *, errored: bool = False,
           unscored: bool = False) -> ExampleResult:
    return ExampleResult(id_, 1, not errored, errored, "out", None, trace=t, unscored=unscored)


def test_agent_metrics_are_means_of_the_hand_computed_per_example_values():
    results = [
        result("a", trace("x", "y", "z", "w", steps=3, errors=(1,))),  # 3/4 ok, 3 steps, 4 calls
        result("b", trace("x", steps=2)),                              # 1/1 ok, 2 steps, 1 call
        result("c", trace(steps=1)),                                   # no calls: no success value
        result("d", trace("x", "y", errors=(0, 1))),                   # 0/2 ok, no steps, 2 calls
        result("e", None),                                             # no trace: no values
        result("f", trace("x", steps=9), errored=True),                # errored: no values
        result("g", trace("x", steps=9), unscored=True),               # unscored: no values
    ]
    metrics = suite_metrics(results)
    assert metrics["tool_success_rate"] == pytest.approx((0.75 + 1.0 + 0.0) / 3)
    assert metrics["mean_steps"] == pytest.approx((3 + 2 + 1) / 3)
    assert metrics["mean_tool_calls"] == pytest.approx((4 + 1 + 0 + 2) / 4)
    values = [example_value(r, "tool_success_rate") for r in results]
    assert values == [0.75, 1.0, None, 0.0, None, None, None]
    assert [example_value(r, "mean_steps") for r in results] == [3, 2, 1, None, None, None, None]
    assert [example_value(r, "mean_tool_calls") for r in results] == [4, 1, 0, 2, None, None,
                                                                        None]
    assert {"mean_steps", "mean_tool_calls"} <= set(LOWER_IS_BETTER)
    assert "tool_success_rate" not in LOWER_IS_BETTER


def test_a_suite_without_traces_has_no_agent_metrics():
    metrics = suite_metrics([result("a", None)])
    assert not {"tool_success_rate", "mean_steps", "mean_tool_calls"} & set(metrics)
    assert math.isfinite(metrics["pass_rate"])


def test_the_trajectory_judge_reads_each_call_in_order_with_its_result_or_error():
    text = trace_text(Trace((ToolCall("a", {"q": 1}, {"r": 2}), ToolCall("b", {}, None, "down")),
                            2))
    assert text == '1. a({"q": 1}) -> result: {"r": 2}\n2. b({}) -> error: down\nsteps: 2'
    assert trace_text(Trace()) == "(no tool calls)\nsteps: unknown"


def test_a_stored_baseline_keeps_the_trace():
    from worker.evals.serialize import from_jsonable, to_jsonable
    from worker.evals.types import SuiteResult

    suite = SuiteResult("s", "d.jsonl", (result("a", Trace(
        (ToolCall("x", {"k": [1]}, {"r": None}, None), ToolCall("y", "raw", None, "down")),
        3, 1, 90, 0.25)), result("b", None)), {})
    assert from_jsonable(SuiteResult, to_jsonable(suite)) == suite


@pytest.mark.slow  # the price lookup imports litellm (seconds)
def test_the_estimate_counts_the_trajectory_judges_calls_and_asks_for_its_price(tmp_path):
    import asyncio

    from worker.evals.config.load import parse_config
    from worker.evals.run.runner import run_suites

    (tmp_path / "d.jsonl").write_text('{"id": "a", "input": "q"}\n')
    config = parse_config(
        "version: 1\nsettings: {max_cost_usd: 1}\nsuites:\n  - name: s\n    dataset: d.jsonl\n"
        "    target: {command: 'true {input_file} {output_file}'}\n    assertions:\n"
        "      - type: trajectory_judge\n"
        "        rubric: r\n        model: openai/unpriced-judge-x\n")
    with pytest.raises(ConfigError) as caught:
        asyncio.run(run_suites([config], tmp_path))
    assert caught.value.line == 8
    assert "the judge of `trajectory_judge`: openai/unpriced-judge-x has no known price" in \
        caught.value.message


@pytest.mark.parametrize(("error", "kept"), [
    (None, None), (False, None), ("", None), ("  ", None), (0, None), ([], None), ({}, None),
    ("down", "down"), (True, "true"), ({"code": 503}, '{"code": 503}'), (7, "7"),
])
def test_only_a_non_empty_error_marks_a_failed_call(error, kept):
    [call] = parse_trace({"tool_calls": [{"name": "a", "result": 1, "error": error}]}).tool_calls
    assert call.error == kept
    success = example_value(_result_with(call), "tool_success_rate")
    assert success == (1.0 if kept is None else 0.0)


def _result_with(call: ToolCall) -> ExampleResult:
    return ExampleResult("e", 1, True, False, "ok", None, trace=Trace((call,), 1))


def test_a_tool_message_with_an_error_object_is_a_failed_call_as_llmgate_writes_it():
    calls = [{"id": f"c{n}", "type": "function", "function": {"name": "lookup",
                                                              "arguments": "{}"}}
             for n in (1, 2, 3)]
    messages = [{"role": "assistant", "content": None, "tool_calls": calls},
                {"role": "tool", "tool_call_id": "c1", "content": '{"error": "no such order"}'},
                {"role": "tool", "tool_call_id": "c2", "content": '{"error": null, "n": 1}'},
                {"role": "tool", "tool_call_id": "c3", "content": '{"status": "shipped"}'},
                {"role": "assistant", "content": "Done."}]
    assert parse_trace({"messages": messages}) == Trace((
        ToolCall("lookup", {}, None, "no such order"),
        ToolCall("lookup", {}, {"error": None, "n": 1}),
        ToolCall("lookup", {}, {"status": "shipped"})), 2)


def test_a_trace_with_both_tool_calls_and_messages_is_refused_as_ambiguous():
    with pytest.raises(TraceError) as caught:
        parse_trace({"tool_calls": [{"name": "a"}], "messages": []})
    assert str(caught.value) == ('"trace" gives both "tool_calls" and "messages": give one '
                                 "(the calls in llmgate's shape, or the OpenAI chat messages "
                                 "they come from)")
