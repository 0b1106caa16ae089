"""What the response cache already holds of an agent's steps, for the estimate before a run.

An agent (a model target with ``tools``, worker/evals/run/agent_target.py) may call the model up
to ``max_steps`` times per example, so the estimate (worker/evals/run/estimate.py) counts that
worst case, less the steps the cache answers. The steps are followed from the first: a cached
step without tool calls is the final answer (nothing left to send); a cached step with tool
calls is answered as the run would answer it when that needs no command (a fixed table, an
unknown tool, arguments that are not JSON: worker/evals/run/tools.py), which gives the next
step's conversation and so its cache key. A step the cache does not hold, or one whose calls
need a tool command (its result is unknown until it runs), ends what is known: every step left
is counted as a call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from worker.evals.llm import ModelCaller
from worker.evals.run.agent_target import agent_endpoint, step_messages, tool_schemas
from worker.evals.run.tools import answer_without_running
from worker.evals.types import ModelTarget


@dataclass(frozen=True)
class KnownSteps:
    """The cached start of one example's agent run.

    Attributes:
        cached: steps the cache answers (0 to ``max_steps``).
        left: model calls still to send at most (``max_steps - cached``, 0 once an answer is
            known).
        answer: the final answer when the cache holds every step up to it, else None.
        messages: the conversation the first step left to send would get (text only, the
            tools as a system message: what its prompt tokens are counted on).
    """

    cached: int
    left: int
    answer: str | None
    messages: list[dict[str, str]]


async def known_steps(target: ModelTarget, messages: list[dict[str, str]], caller: ModelCaller,
                      use_cache: bool) -> KnownSteps:
    """Follow one example's agent steps through the response cache (module docstring).

    Args:
        target: a model target with ``tools``.
        messages: the example's rendered prompt.
        caller: the run's call path (its cache and key function).
        use_cache: False when the run will not read the cache (repeats): nothing is cached.

    Returns:
        The steps the cache answers and those left to send at most.
    """
    endpoint = agent_endpoint(target)
    conversation: list[dict[str, Any]] = list(messages)
    cached = 0
    while use_cache and cached < target.max_steps:
        key = caller.chat_key(endpoint, conversation, "chat", target.version)
        hit = (await caller.cached_answers([key]))[0]
        if hit is None:
            break
        cached += 1
        if not hit.tool_calls:
            return KnownSteps(cached, 0, hit.text, countable(target, conversation))
        calls = [answer_without_running(target.tools, c.name, c.arguments)
                 for c in hit.tool_calls]
        answered = [call for call in calls if call is not None]
        if len(answered) < len(calls):
            break
        conversation += step_messages(hit, answered)
    return KnownSteps(cached, target.max_steps - cached, None, countable(target, conversation))


def countable(target: ModelTarget, conversation: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Return the conversation as text messages, the tools' schemas first as a system message,
    so the tokenizer counts what a step sends (tool calls as their JSON text)."""
    tools = {"role": "system", "content": json.dumps(tool_schemas(target.tools))}
    return [tools, *({"role": str(m["role"]),
                      "content": str(m.get("content") or "") + (
                          json.dumps(m["tool_calls"]) if m.get("tool_calls") else "")}
                     for m in conversation)]
