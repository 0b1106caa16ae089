"""Agents: a model target with ``tools`` answers an example in steps, calling tools between them.

Each step sends the conversation so far to the model with the tools in OpenAI's format
(``tools: [{"type": "function", "function": {name, description, parameters}}]``, which litellm
translates for other providers). An answer with tool calls gets each call answered by the tool
the config names (worker/evals/run/tools.py), appended as an ``assistant`` message with its
``tool_calls`` and one ``tool`` message per call (the result as JSON text, or
``{"error": ...}``), and the model is called again; an answer without tool calls is the
output. At most ``max_steps`` model calls: an agent still calling tools at the last one fails
the example (error kind ``target``, its trace kept for the report).

Every step goes through the run's call path (response cache keyed on the whole conversation
and the tools, budget, retries), so a re-run with the same tool results costs nothing. The
output's trace holds the calls, ``steps`` (model calls), ``turns`` 1, ``tokens`` (all steps)
and ``cost``; its latency is the model's and the tools' time, its cost the steps' (None when
any step's cost is unknown).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from worker.evals.config import PromptTemplate, render
from worker.evals.llm import ModelCaller
from worker.evals.llm_types import Answer, Endpoint, RunUsage, ToolCall, ToolSpec, Trace
from worker.evals.run.model_target import answer_family
from worker.evals.run.tools import call_tool
from worker.evals.serialize import replaced_note
from worker.evals.types import Example, ModelTarget, Settings, TargetOutput


def tool_schemas(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    """Return the tools in OpenAI's ``tools`` format."""
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.parameters}} for t in tools]


@dataclass
class _Progress:
    """What the steps so far made and spent."""

    calls: list[ToolCall] = field(default_factory=list)
    spend: RunUsage = field(default_factory=RunUsage)
    latency_ms: float = 0.0
    usage: dict[str, int] = field(default_factory=lambda: {"input": 0, "output": 0,
                                                           "cached_input": 0})
    cost_usd: float | None = 0.0
    cached: bool = True
    steps: int = 0

    def add(self, answer: Answer) -> None:
        self.steps += 1
        self.latency_ms += answer.latency_ms
        self.cached = self.cached and answer.cached
        for key, n in (("input", answer.usage.input), ("output", answer.usage.output),
                       ("cached_input", answer.usage.cached_input)):
            self.usage[key] += n
        self.cost_usd = None if self.cost_usd is None or answer.cost_usd is None \
            else self.cost_usd + answer.cost_usd

    def trace(self) -> Trace:
        tokens = self.usage["input"] + self.usage["output"]
        return Trace(tuple(self.calls), self.steps, 1, tokens or None, self.cost_usd)


async def run_agent(target: ModelTarget, template: PromptTemplate, example: Example,
                    caller: ModelCaller, root: Path, settings: Settings, *,
                    use_cache: bool = True,
                    messages: list[dict[str, Any]] | None = None) -> TargetOutput:
    """Answer one example with the agent loop of the module docstring.

    Args:
        target: a model target with ``tools``.
        template: its parsed prompt file.
        example: the example.
        caller: the run's call path.
        root: the checkout tool commands run in.
        settings: ``timeout_s`` and ``env`` of tool commands.
        use_cache: False for repeats.
        messages: the conversation to start from instead of the prompt rendered for
            ``example`` (a later turn of a conversation: worker/evals/run/conversation.py).

    Returns:
        The final answer with its trace, or an error (a failed call, as `run_model`'s; or no
        answer within ``max_steps``) with the trace so far.

    Raises:
        ConfigError: the template cannot be rendered for this example.
    """
    messages = list(render(template, example)) if messages is None else list(messages)
    endpoint = agent_endpoint(target)
    done = _Progress()
    for _ in range(target.max_steps):
        outcome = await caller.chat(endpoint, messages, kind="chat", version=target.version,
                                    use_cache=use_cache, family=answer_family(target))
        done.spend = done.spend + outcome.spend
        if outcome.answer is None:
            return TargetOutput(None, outcome.error, done.latency_ms,
                                error_kind=outcome.error_kind, spend=done.spend,
                                error_field=outcome.error_field, trace=done.trace())
        answer = outcome.answer
        done.add(answer)
        if not answer.tool_calls:
            return TargetOutput(answer.text, None, done.latency_ms, done.usage, done.cost_usd,
                                spend=done.spend, cached=done.cached, trace=done.trace(),
                                notes=(replaced_note(answer.replaced),) if answer.replaced
                                else ())
        messages.extend(await _answer_tools(target, answer, example, root, settings, done))
    return TargetOutput(None, f"the agent gave no answer within max_steps {target.max_steps} "
                        "(it still called tools at the last step)", done.latency_ms,
                        error_kind="target", spend=done.spend, trace=done.trace())


async def _answer_tools(target: ModelTarget, answer: Answer, example: Example, root: Path,
                        settings: Settings, done: _Progress) -> list[dict[str, Any]]:
    """Answer the step's tool calls; return the messages that carry them and their answers."""
    calls: list[ToolCall] = []
    for request in answer.tool_calls:
        started = time.perf_counter()
        call = await call_tool(target.tools, request.name, request.arguments, example.id,
                               root, settings)
        done.latency_ms += (time.perf_counter() - started) * 1000
        calls.append(call)
    done.calls.extend(calls)
    return step_messages(answer, calls)


def agent_endpoint(target: ModelTarget) -> Endpoint:
    """Return the endpoint every step of the agent calls: the target's, with its tools in the
    call parameters (so they are part of each step's cache key)."""
    return replace(target.endpoint, params={**target.endpoint.params,
                                            "tools": tool_schemas(target.tools)})


def step_messages(answer: Answer, calls: list[ToolCall]) -> list[dict[str, Any]]:
    """Return the messages a step with tool calls adds to the conversation.

    Args:
        answer: the model's answer, with its ``tool_calls``.
        calls: each requested call answered, in the same order.

    Returns:
        The ``assistant`` message with the calls, then one ``tool`` message per call (its
        result as JSON text, or ``{"error": ...}``).
    """
    requested = [{"id": c.id, "type": "function",
                  "function": {"name": c.name, "arguments": c.arguments}}
                 for c in answer.tool_calls]
    messages: list[dict[str, Any]] = [{"role": "assistant", "content": answer.text or None,
                                       "tool_calls": requested}]
    for request, call in zip(answer.tool_calls, calls, strict=True):
        content = {"error": call.error} if call.error is not None else call.result
        messages.append({"role": "tool", "tool_call_id": request.id,
                         "content": json.dumps(content, ensure_ascii=False)})
    return messages
