"""The trajectory judge: an ``llm_judge`` that sees what the agent did, not only its answer.

``type: trajectory_judge`` takes the options of ``llm_judge`` (worker/evals/score/judges.py:
``rubric``/``criteria``, ``scale``, ``threshold``, ``n``, ``include_expected``, model fields)
and the same reply parsing, quorum and caching. Its prompt adds the agent's trace: each tool
call in order with its arguments and its result or error (JSON, each clipped to
`MAX_VALUE_CHARS` characters, at most `MAX_CALLS_SHOWN` calls), and the steps. Its version
(`TRAJECTORY_TEMPLATE_VERSION` with the rubric's hash) is part of the cache key. An output
without a trace fails it without a judge call (as the trace assertions,
worker/evals/score/agent.py).
"""

from __future__ import annotations

import json
from typing import Any

from worker.evals.llm import ModelCaller
from worker.evals.llm_types import RunUsage
from worker.evals.score.agent import NO_TRACE
from worker.evals.score.judge_text import seal, untrusted
from worker.evals.score.judges import SYSTEM, JudgeSpec, run_judge
from worker.evals.types import AssertionResult, Example, Trace

#: Bumped whenever the prompt below changes.
TRAJECTORY_TEMPLATE_VERSION = "trajectory_judge/3"
MAX_VALUE_CHARS = 500
MAX_CALLS_SHOWN = 50


def _json(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return untrusted(text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS] + " ...")


def trace_text(trace: Trace) -> str:
    """Return the trace as the judge reads it: one numbered line per call, then the steps."""
    lines = []
    for index, call in enumerate(trace.tool_calls[:MAX_CALLS_SHOWN], start=1):
        answer = f"error: {_json(call.error)}" if call.error else f"result: {_json(call.result)}"
        lines.append(f"{index}. {call.name}({_json(call.arguments)}) -> {answer}")
    if len(trace.tool_calls) > MAX_CALLS_SHOWN:
        lines.append(f"... and {len(trace.tool_calls) - MAX_CALLS_SHOWN} more calls")
    lines.append(f"steps: {'unknown' if trace.steps is None else trace.steps}")
    return "\n".join(lines if trace.tool_calls else ["(no tool calls)", *lines])


def trajectory_messages(js: JudgeSpec, example: Example, output: Any,
                        trace: Trace) -> list[dict[str, str]]:
    """Return the trajectory judge's messages for one answer and its trace."""
    parts = [f"Rubric (it grades how the agent worked, from its tool calls, and its answer):\n"
             f"{js.rubric}", f"Input:\n<input>\n{_json(example.input)}\n</input>"]
    if js.include_expected and example.expected is not None:
        parts.append(f"Reference answer:\n<reference>\n{_json(example.expected)}\n</reference>")
    shown = untrusted(trace_text(trace))  # tool names are the trace's, so untrusted too
    parts.append(f"The agent's tool calls, in order:\n<trajectory>\n{shown}\n</trajectory>")
    parts.append(f"The agent's final answer:\n<answer>\n{_json(output)}\n</answer>")
    return seal(SYSTEM, parts, js.scale)


async def run_trajectory_judge(js: JudgeSpec, caller: ModelCaller, example: Example,
                               output: Any, trace: Trace | None, *,
                               use_cache: bool = True) -> tuple[AssertionResult, RunUsage]:
    """Judge one answer with its trace (``js.kind`` is `TRAJECTORY_TEMPLATE_VERSION`).

    Returns:
        As `worker.evals.score.judges.run_judge`, of type ``trajectory_judge``; a failed
        result with nothing spent when there is no trace.
    """
    if trace is None:
        return AssertionResult("trajectory_judge", False, 0.0, NO_TRACE), RunUsage()
    return await run_judge(js, caller, example, output, use_cache=use_cache,
                           assertion_type="trajectory_judge",
                           messages=trajectory_messages(js, example, output, trace))
