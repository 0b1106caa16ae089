"""``tools:`` and ``max_steps:`` of a model target: the tools an agent's model may call (pure).

::

    target:
      model: openai/gpt-4o-mini
      prompt: prompts/agent.txt
      max_steps: 4                      # model calls per example, at most (default 8)
      tools:
        - name: lookup_order            # [A-Za-z0-9_-]{1,64}
          description: Find an order by its id.
          parameters: {type: object, properties: {order_id: {type: string}},
                       required: [order_id]}
          results:                      # a fixed table: equal arguments get the result
            - {arguments: {order_id: A1}, result: {status: shipped}}
          result: {status: unknown}     # any other call (without it: a tool error)
        - name: refund
          command: python tools/refund.py {input_file} {output_file}

A tool has ``command`` (run per call like a command target: worker/evals/run/tools.py), or
``results`` and/or ``result`` (a fixed table). ``parameters`` is a JSON Schema (default: an
object with no declared properties), checked at config time.
"""

from __future__ import annotations

import re
from typing import Any

from yaml.nodes import Node

from worker.evals.config.reader import Reader
from worker.evals.llm_types import ToolSpec
from worker.evals.score import check_schema

TOOL_KEYS = ("name", "description", "parameters", "command", "results", "result")
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
MAX_STEPS = 50
MAX_TOOLS = 64


def parse_tools(reader: Reader, node: Node) -> tuple[ToolSpec, ...]:
    """Parse ``tools:``, a list of tool mappings (module docstring).

    Raises:
        ConfigError: at the offending node: not a list, an unknown key, a bad or repeated
            name, an invalid schema, no implementation, or a malformed table.
    """
    items = reader.value(node)
    if not isinstance(items, list) or not items or len(items) > MAX_TOOLS:
        raise reader.error(node, f"`tools` must be a list of 1 to {MAX_TOOLS} tools")
    tools = [_tool(reader, child) for child in getattr(node, "value", [])]
    names = [tool.name for tool in tools]
    for tool in tools:
        if names.count(tool.name) > 1:
            raise reader.error(node, f"`tools`: the name {tool.name!r} is given twice")
    return tuple(tools)


def _tool(reader: Reader, node: Node) -> ToolSpec:
    entries = reader.mapping(node, "a tool", TOOL_KEYS)
    values = {key: reader.value(value) for key, (_, value) in entries.items()}

    def fail(message: str) -> Any:
        return reader.error(node, f"tool {values.get('name', '?')!r}: {message}")

    name = values.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        raise fail("`name` must be 1 to 64 letters, digits, `_` or `-`")
    parameters = values.get("parameters", {"type": "object", "properties": {}})
    check_schema(parameters, fail)
    command = values.get("command")
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise fail("`command` must be a command line")
    table = "results" in values or "result" in values
    if (command is not None) == table:
        raise fail("needs `command`, or a fixed table (`results` and/or `result`)")
    description = values.get("description", "")
    if not isinstance(description, str):
        raise fail("`description` must be text")
    return ToolSpec(name, description, parameters, command, _results(values, fail),
                    values.get("result"), "result" in values, int(node.start_mark.line) + 1)


def _results(values: dict[str, Any], fail: Any) -> tuple[tuple[Any, Any], ...]:
    rows = values.get("results", [])
    if not isinstance(rows, list) or not all(
            isinstance(r, dict) and set(r) == {"arguments", "result"} for r in rows):
        raise fail("`results` must be a list of `{arguments: {...}, result: ...}`")
    for index, row in enumerate(rows, start=1):
        if not isinstance(row["arguments"], dict):
            raise fail(f"`results` row {index}: `arguments` must be a mapping (the call's "
                       f"arguments object), got {type(row['arguments']).__name__}")
    return tuple((r["arguments"], r["result"]) for r in rows)


def parse_max_steps(reader: Reader, node: Node) -> int:
    """Parse ``max_steps``: an integer from 1 to `MAX_STEPS`."""
    value = reader.value(node)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_STEPS:
        raise reader.error(node, f"`max_steps` must be an integer from 1 to {MAX_STEPS}")
    return value
