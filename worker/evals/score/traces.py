"""Agent traces: read the ``trace`` a target reports, in llmgate's shape or OpenAI's (pure).

The shape a command target writes under ``"trace"`` of its output document::

    {"tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "A1"},
                     "result": {"status": "shipped"}, "error": null}],
     "steps": 2, "turns": 1, "tokens": 812, "cost": 0.0012}

Every key is optional. ``tool_calls`` is in call order; each call needs ``name``;
``arguments`` may be JSON text (parsed when it is valid JSON); a non-empty ``error`` marks a
failed call (``null``, ``false``, ``""``, ``0``, ``[]`` and ``{}`` do not; other values are shown
as their JSON text). A call may also be written as OpenAI's chat API (and litellm) give it:
``{"id", "type": "function", "function": {"name", "arguments": "<JSON text>"}}``. Instead of
``tool_calls`` a trace may hold ``messages``, an OpenAI chat message list: the calls are read
from the assistant messages' ``tool_calls``, each result from the ``tool`` message with its
``tool_call_id``, and ``steps`` (when not given) is the number of assistant messages; a
``tool`` message whose content is a JSON object with a non-empty ``"error"`` (the shape
llmgate's own agent writes for a failed call) is a failed call. A trace holding both
``tool_calls`` and ``messages`` is ambiguous and refused.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

from worker.evals.llm_types import ToolCall, Trace

#: Most tool calls kept from one trace.
MAX_CALLS = 1000


class TraceError(ValueError):
    """The trace is malformed; the message says what is wrong."""


def parse_trace(value: Any) -> Trace | None:
    """Read a reported ``trace`` (module docstring); None when there is none.

    Raises:
        TraceError: not an object, both ``tool_calls`` and ``messages``, a call without a
            name, or a count that is not a non-negative integer (``cost``: a non-negative
            number of USD).
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TraceError('"trace" must be an object')
    if "messages" in value and "tool_calls" in value:
        raise TraceError('"trace" gives both "tool_calls" and "messages": give one (the calls '
                         'in llmgate\'s shape, or the OpenAI chat messages they come from)')
    if "messages" in value:
        calls, assistants = calls_from_messages(value["messages"])
    else:
        calls, assistants = _calls(value.get("tool_calls")), None
    steps = _count(value, "steps")
    cost = value.get("cost")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, int | float)
                             or not math.isfinite(cost) or cost < 0):
        raise TraceError(f'"trace.cost" must be a non-negative number of USD, got {cost!r}')
    return Trace(calls, steps if steps is not None else assistants, _count(value, "turns"),
                 _count(value, "tokens"), None if cost is None else float(cost))


def _count(value: dict[str, Any], key: str) -> int | None:
    count = value.get(key)
    if count is None:
        return None
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise TraceError(f'"trace.{key}" must be a non-negative integer, got {count!r}')
    return count


def _calls(value: Any) -> tuple[ToolCall, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise TraceError('"trace.tool_calls" must be a list')
    return tuple(tool_call(item) for item in value[:MAX_CALLS])


def tool_call(item: Any, result: Any = None) -> ToolCall:
    """Read one call in llmgate's shape or OpenAI's (module docstring).

    Raises:
        TraceError: not an object, or without a name.
    """
    if not isinstance(item, dict):
        raise TraceError("each tool call must be an object")
    inner = item.get("function")
    function: dict[str, Any] = inner if isinstance(inner, dict) else item
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise TraceError(f"a tool call needs a `name`, got {json.dumps(item)[:200]}")
    return ToolCall(name, arguments_of(function.get("arguments")),
                    item.get("result", result), error_text(item.get("error")))


def error_text(value: Any) -> str | None:
    """Return a reported ``error`` as text, or None when it marks no failure.

    ``None``, ``False``, ``0``, and empty or blank text, lists and objects mark none; text is
    kept as it is, any other value becomes its JSON text.
    """
    if value is None or value is False or (isinstance(value, int | float) and value == 0):
        return None
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, list | dict) and not value:
        return None
    return json.dumps(value, ensure_ascii=False)[:500]


def arguments_of(value: Any) -> Any:
    """Return arguments as a JSON value: JSON text parsed, other text kept as it is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value) if value.strip() else {}
    except ValueError:
        return value


def calls_from_messages(messages: Any) -> tuple[tuple[ToolCall, ...], int]:
    """Read the tool calls of an OpenAI chat message list, with their results.

    Returns:
        The calls in order, and the number of assistant messages (the model's steps).

    Raises:
        TraceError: ``messages`` is not a list of objects, or a call has no name.
    """
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise TraceError('"trace.messages" must be a list of chat messages (objects)')
    results = {m.get("tool_call_id"): m.get("content") for m in messages
               if m.get("role") == "tool"}
    calls: list[ToolCall] = []
    assistants = 0
    for message in messages:
        if message.get("role") != "assistant":
            continue
        assistants += 1
        for item in message.get("tool_calls") or []:
            answer = arguments_of(results.get(item.get("id"))) if isinstance(item, dict) \
                else None
            call = tool_call(item, answer)
            failed = error_text(answer.get("error")) if isinstance(answer, dict) else None
            calls.append(replace(call, result=None, error=failed) if failed else call)
    return tuple(calls[:MAX_CALLS]), assistants
