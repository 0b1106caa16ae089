"""Assertions on an agent's trace: which tools it called, how, in what order, in how many steps
(pure).

- ``tools_called``: ``tools`` (names) were each called at least once; with ``order: true`` in
  that order (as a subsequence of the calls: other calls may come between).
- ``tools_not_called``: none of ``tools`` was called.
- ``max_tool_calls``: at most ``max`` calls (of the tool ``tool`` only, when given).
- ``tool_arguments``: ``schemas: {tool: JSON Schema}``: the arguments of every call of each
  named tool are valid (jsonschema, the draft the schema names, else 2020-12); calls of other
  tools are not checked, and a named tool never called passes (pair with ``tools_called``).
- ``trajectory``: ``steps``: the whole sequence of calls, one pattern per call: a tool name (a
  glob: ``lookup_*``), ``?`` for any one call, ``*`` for any number of calls (none included).
- ``max_steps``: the agent used at most ``max`` model steps (``trace.steps``).

An output without a trace fails each of them ("no trace"): the gate cannot tell what an agent
did that did not say, so it never passes on its behalf.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from typing import Any

import jsonschema

from worker.errors import ConfigError
from worker.evals.score.structured import check_schema
from worker.evals.types import AssertionSpec, Trace

#: The assertion types of this module.
AGENT_TYPES = ("tools_called", "tools_not_called", "max_tool_calls", "tool_arguments",
               "trajectory", "max_steps")
PARAMS: dict[str, tuple[str, ...]] = {
    "tools_called": ("tools", "order"), "tools_not_called": ("tools",),
    "max_tool_calls": ("max", "tool"), "tool_arguments": ("schemas",),
    "trajectory": ("steps",), "max_steps": ("max",),
}
NO_TRACE = "the target reported no trace (tool calls): see the trace shape in docs/agents.md"
Fail = Callable[[str], ConfigError]
Outcome = tuple[bool, str]


def validate(spec: AssertionSpec, fail: Fail) -> None:
    """Check an agent assertion's options at config time.

    Raises:
        ConfigError: ``fail(message)`` for an unknown, missing or malformed option.
    """
    p = spec.params
    for key in p:
        if key not in PARAMS[spec.type]:
            raise fail(f"unknown option {key!r} (known options: {', '.join(PARAMS[spec.type])})")
    _validate_values(spec.type, p, fail)


def _validate_values(kind: str, p: dict[str, Any], fail: Fail) -> None:
    if kind in ("tools_called", "tools_not_called"):
        _names(p.get("tools"), "tools", fail)
        if not isinstance(p.get("order", False), bool):
            raise fail("`order` must be true or false")
    elif kind in ("max_tool_calls", "max_steps"):
        limit = p.get("max")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise fail("needs `max`, a non-negative integer")
        if "tool" in p:
            _names([p["tool"]], "tool", fail)
    elif kind == "tool_arguments":
        schemas = p.get("schemas")
        if not isinstance(schemas, dict) or not schemas:
            raise fail("needs `schemas`, a mapping of tool name to the JSON Schema of its "
                       "arguments")
        for schema in schemas.values():
            check_schema(schema, fail)
    else:
        _names(p.get("steps"), "steps", fail)


def check_tool_names(spec: AssertionSpec, offered: Sequence[str], fail: Fail) -> None:
    """Check that an agent assertion names only tools the model target offers (``tools:``).

    ``tools``, ``tool`` and the keys of ``schemas`` must be offered names; each ``steps``
    pattern but ``?`` and ``*`` must match (as a glob) at least one. Other assertion types,
    and targets whose tools are unknown (command targets: ``offered`` empty), pass unchecked.

    Raises:
        ConfigError: ``fail("unknown tool nosuch; the target offers: a, b")``.
    """
    if spec.type not in AGENT_TYPES or not offered:
        return
    p = spec.params
    names = [*p.get("tools", ()), *([p["tool"]] if "tool" in p else []), *p.get("schemas", {})]
    for name in names:
        if name not in offered:
            raise fail(f"unknown tool {name}; the target offers: {', '.join(offered)}")
    for pattern in p.get("steps", ()) if spec.type == "trajectory" else ():
        if pattern not in ("?", "*") and not fnmatch.filter(offered, pattern):
            raise fail(f"unknown tool {pattern} (no offered tool matches it); the target "
                       f"offers: {', '.join(offered)}")


def _names(value: Any, key: str, fail: Fail) -> None:
    if not isinstance(value, list) or not value or not all(
            isinstance(v, str) and v.strip() for v in value):
        raise fail(f"`{key}` must be a non-empty list of tool names")


def check(spec: AssertionSpec, trace: Trace | None) -> Outcome:
    """Check one validated agent assertion against a trace: ``(passed, message)``."""
    if trace is None:
        return False, NO_TRACE
    return _CHECKS[spec.type](spec.params, trace)


def _called(p: dict[str, Any], trace: Trace) -> Outcome:
    names = [c.name for c in trace.tool_calls]
    missing = [t for t in p["tools"] if t not in names]
    if missing:
        return False, f"expected a call of {', '.join(missing)}; called: {_shown(names)}"
    if p.get("order", False) and not _in_order(p["tools"], names):
        return False, f"expected calls in the order {' > '.join(p['tools'])}; called: " \
                      f"{_shown(names)}"
    return True, ""


def _in_order(wanted: Sequence[str], names: Sequence[str]) -> bool:
    rest = iter(names)
    return all(any(name == want for name in rest) for want in wanted)


def _not_called(p: dict[str, Any], trace: Trace) -> Outcome:
    hits = [c.name for c in trace.tool_calls if c.name in p["tools"]]
    return not hits, f"called forbidden tool {', '.join(dict.fromkeys(hits))}"


def _max_calls(p: dict[str, Any], trace: Trace) -> Outcome:
    tool = p.get("tool")
    count = sum(tool is None or c.name == tool for c in trace.tool_calls)
    what = f"calls of {tool}" if tool else "tool calls"
    return count <= p["max"], f"expected at most {p['max']} {what}, made {count}"


def _arguments(p: dict[str, Any], trace: Trace) -> Outcome:
    for index, call in enumerate(trace.tool_calls, start=1):
        schema = p["schemas"].get(call.name)
        if schema is None:
            continue
        validator = jsonschema.validators.validator_for(schema)(schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(call.arguments))
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "(root)"
            return False, (f"call {index} ({call.name}): arguments invalid at {where}: "
                           f"{error.message[:200]}")
    return True, ""


def _trajectory(p: dict[str, Any], trace: Trace) -> Outcome:
    names = [c.name for c in trace.tool_calls]
    ok = matches(p["steps"], names)
    return ok, f"expected the calls {' > '.join(p['steps'])}; called: {_shown(names)}"


def matches(patterns: Sequence[str], names: Sequence[str]) -> bool:
    """Return True when the whole sequence ``names`` matches ``patterns`` (``*``: any number
    of calls, ``?``: one call, else a glob of one tool name); dynamic programming, O(n x m)."""
    reach = {0}  # positions in names reached after the patterns so far
    for pattern in patterns:
        if pattern == "*":
            reach = set(range(min(reach), len(names) + 1)) if reach else set()
        else:
            reach = {i + 1 for i in reach if i < len(names)
                     and (pattern == "?" or fnmatch.fnmatchcase(names[i], pattern))}
    return len(names) in reach


def _max_steps(p: dict[str, Any], trace: Trace) -> Outcome:
    if trace.steps is None:
        return False, "the target reported no `steps` in its trace"
    return trace.steps <= p["max"], f"expected at most {p['max']} steps, took {trace.steps}"


def _shown(names: Sequence[str]) -> str:
    return " > ".join(names[:20]) + (" ..." if len(names) > 20 else "") if names else "none"


_CHECKS: dict[str, Callable[[dict[str, Any], Trace], Outcome]] = {
    "tools_called": _called, "tools_not_called": _not_called, "max_tool_calls": _max_calls,
    "tool_arguments": _arguments, "trajectory": _trajectory, "max_steps": _max_steps,
}
