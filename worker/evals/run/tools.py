"""Answer an agent's tool call with the tool the config names: a fixed table or a command.

A fixed table (``results``) answers a call whose arguments equal a row's (JSON values, key
order ignored, 1 == 1.0) with the row's result, any other call with ``result`` when it is set,
else with a tool error. A ``command`` runs once per call, confined like a command target
(worker/evals/run/targets.py: a fresh temporary directory, a scrubbed environment, the sandbox,
``settings.timeout_s``): ``{input_file}`` holds ``{"name", "arguments", "id"}`` (the example's
id), and the command writes ``{"result": ...}`` or ``{"error": "..."}`` to ``{output_file}``.
A call of a tool the target does not offer, arguments that are not JSON, a command that fails
or a table without the row is a failed call: its error goes back to the model as the tool's
answer and into the trace (``tool_success_rate``), never a crash of the run.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from worker.evals.llm_types import ToolCall, ToolSpec
from worker.evals.run.targets import build_argv, read_document
from worker.evals.score import arguments_of
from worker.evals.types import Settings
from worker.security import TargetFailed, build_env, run_confined


async def call_tool(tools: tuple[ToolSpec, ...], name: str, arguments_text: str,
                    example_id: str, cwd: Path, settings: Settings) -> ToolCall:
    """Answer one call (module docstring).

    Args:
        tools: the target's tools.
        name: the tool the model called.
        arguments_text: the arguments as the model wrote them (JSON text).
        example_id: the example's id (given to a command).
        cwd: the checkout a command runs in.
        settings: ``timeout_s`` and ``env`` of command tools.

    Returns:
        The call with its result, or with ``error`` set.
    """
    known = answer_without_running(tools, name, arguments_text)
    if known is not None:
        return known
    tool = next(t for t in tools if t.name == name)
    assert tool.command is not None  # answer_without_running answers every other call
    return await _from_command(tool, tool.command, arguments_of(arguments_text), example_id,
                               cwd, settings)


def answer_without_running(tools: tuple[ToolSpec, ...], name: str,
                           arguments_text: str) -> ToolCall | None:
    """Answer a call that needs no command: an unknown tool, arguments that are not JSON, or a
    fixed table (arguments as `call_tool`'s).

    Returns:
        The call with its result or error, as `call_tool` would give it; None when the call
        needs the tool's command run (only `call_tool` does that).
    """
    arguments = arguments_of(arguments_text)
    tool = next((t for t in tools if t.name == name), None)
    if tool is None:
        return ToolCall(name, arguments, error=f"no tool named {name!r}")
    if isinstance(arguments_text, str) and arguments_text.strip() and arguments == arguments_text:
        return ToolCall(name, arguments, error="the arguments are not JSON")
    if tool.command is None:
        return _from_table(tool, arguments)
    return None


def _from_table(tool: ToolSpec, arguments: Any) -> ToolCall:
    for row_arguments, result in tool.results:
        if row_arguments == arguments:  # JSON values: dicts ignore key order, 1 == 1.0
            return ToolCall(tool.name, arguments, result)
    if tool.has_default:
        return ToolCall(tool.name, arguments, tool.default)
    return ToolCall(tool.name, arguments, error="no result for these arguments")


async def _from_command(tool: ToolSpec, command: str, arguments: Any, example_id: str,
                        cwd: Path, settings: Settings) -> ToolCall:
    workdir = Path(tempfile.mkdtemp(prefix="llmgate-tool-"))
    try:
        input_path, output_path = workdir / "input.json", workdir / "output.json"
        input_path.write_text(json.dumps({"name": tool.name, "arguments": arguments,
                                          "id": example_id}, ensure_ascii=False), "utf-8")
        argv = build_argv(command, input_path, output_path)
        await run_confined(argv, cwd, build_env(settings.env, workdir), settings.timeout_s,
                           workdir)
        document = read_document(output_path)
    except TargetFailed as exc:
        return ToolCall(tool.name, arguments, error=str(exc)[:500])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if isinstance(document, dict) and isinstance(document.get("error"), str):
        return ToolCall(tool.name, arguments, error=document["error"][:500])
    if not isinstance(document, dict) or "result" not in document:
        return ToolCall(tool.name, arguments,
                        error='the tool wrote no {"result": ...} or {"error": "..."}')
    return ToolCall(tool.name, arguments, document["result"])
