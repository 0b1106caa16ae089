"""Run a command target once per example, isolated from the worker's secrets.

Protocol: llmgate writes ``input.json`` (``{"id", "input", "vars"}``, never ``expected``; for a turn
of a conversation also ``turn`` and ``history``, worker/evals/run/conversation.py) into a fresh
temporary directory outside the checkout (``$TMPDIR/llmgate-target-<owner>-*``: a killed worker's
are removed by the next one, `worker.security.scratch`), runs the command (split with shlex, never a
shell) in ``cwd`` (the run's view of the checkout, without ``.git`` and the eval data:
worker/evals/run/views.py) with ``{input_file}``/``{output_file}`` replaced by paths in that
directory, and reads ``output.json``: ``{"output": ..., "usage": {"input": n, "output": n}, "cost":
usd}`` (``usage`` and ``cost`` optional). The command sees only PATH, LANG/LC_ALL,
HOME and TMPDIR (both the temporary directory) and the variables named in ``settings.env``;
it runs in its own session, and its whole process group is killed on timeout and after exit
(`worker.security.process.run_confined`: its answer is read when it exits; processes it left
behind holding its output are ended after `worker.security.process.EXIT_GRACE_S`, and the
example gets a note), and when the worker dies
(`worker.security.sandbox_procs`). It runs confined by `worker.security.sandbox`
(rlimits; with Landlock, no access to the worker's other checkouts, files or memory, and no TCP
connection to Redis). Its output is capped: the output file at `MAX_OUTPUT_BYTES`, stdout/stderr
to their last `worker.security.process.MAX_LOG_BYTES`.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import stat
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from worker.evals.score import OutputError, parse_output_document
from worker.evals.serialize import decode_output
from worker.evals.types import CommandTarget, Example, Settings, TargetOutput
from worker.security import TARGET_PREFIX, TargetFailed, build_env, run_confined, scratch

#: Largest output file read, bytes (1 MiB); a bigger one is an error.
MAX_OUTPUT_BYTES = 1 << 20
USAGE_KEYS = ("input", "output")


async def run_command(
    target: CommandTarget, example: Example, cwd: Path, settings: Settings,
    history: list[dict[str, Any]] | None = None,
) -> TargetOutput:
    """Run the target command for one example.

    Args:
        target: the command line with ``{input_file}`` and ``{output_file}`` placeholders.
        example: the example; its ``expected`` value is never given to the command.
        cwd: the directory the command runs in (the run's view of the checkout).
        settings: ``timeout_s`` (seconds, wall clock) and ``env`` (variable names to pass).
        history: for a turn of a conversation, the earlier turns
            (``[{"role": "user"|"assistant", "content": ...}]``, worker/evals/run/
            conversation.py): the input file then also has ``turn`` (1-based) and ``history``.

    Returns:
        The output with ``latency_ms`` (milliseconds, wall clock), ``usage``, ``cost_usd`` and
        a note when the command left processes running (`worker.security.process.Finished`);
        or ``output=None`` with ``error`` set when the command could not start, exited
        non-zero, timed out, or wrote a missing, oversized or invalid output file. Never raises
        for a misbehaving command.
    """
    workdir = scratch.make(TARGET_PREFIX)  # named after this process: worker/security/scratch.py
    started = time.perf_counter()
    try:
        input_path, output_path = workdir / "input.json", workdir / "output.json"
        document: dict[str, Any] = {"id": example.id, "input": example.input,
                                    "vars": example.vars}
        if history is not None:
            document |= {"turn": len(history) // 2 + 1, "history": history}
        input_path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
        argv = build_argv(target.command, input_path, output_path)
        finished = await run_confined(argv, cwd, build_env(settings.env, workdir),
                                      settings.timeout_s, workdir)
        result = read_target_output(output_path, (time.perf_counter() - started) * 1000)
        if finished.note:  # it left processes behind: they were ended, the example says so
            result = replace(result, notes=(*result.notes, finished.note))
    except TargetFailed as exc:
        return TargetOutput(None, str(exc), (time.perf_counter() - started) * 1000,
                            error_kind="target")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def build_argv(command: str, input_path: Path, output_path: Path) -> list[str]:
    """Split ``command`` with shlex and fill in the placeholders in each word.

    Raises:
        TargetFailed: the command cannot be split or is empty.
    """
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise TargetFailed(f"invalid command {command!r}: {exc}") from None
    if not words:
        raise TargetFailed("the command is empty")
    return [
        word.replace("{input_file}", str(input_path)).replace("{output_file}", str(output_path))
        for word in words
    ]


def read_target_output(path: Path, measured_ms: float) -> TargetOutput:
    """Read the output file as a structured output (worker/evals/score/outputs.py).

    Args:
        path: the output file.
        measured_ms: the command's wall time, used when the file has no ``latency_ms``.

    Raises:
        TargetFailed: the file cannot be read (see `read_document`) or is not a valid output.
    """
    document, invalid = read_document_counted(path)
    try:
        return parse_output_document(document, measured_ms, invalid)
    except OutputError as exc:
        raise TargetFailed(f"the output file is invalid: {exc}") from None


def read_output(path: Path) -> tuple[Any, dict[str, int], float | None]:
    """Read the output file: ``(output, usage, cost_usd)``.

    Raises:
        TargetFailed: as `read_document`, or not an object with ``output``, or with an invalid
            ``usage`` or ``cost``.
    """
    document = read_document(path)
    if not isinstance(document, dict) or "output" not in document:
        raise TargetFailed('the output file must be a JSON object with an "output" key')
    return document["output"], _usage(document.get("usage")), _cost(document.get("cost"))


def read_document(path: Path) -> Any:
    """Read and parse the JSON output file (`read_document_counted` without the count).

    Raises:
        TargetFailed: as `read_document_counted`.
    """
    return read_document_counted(path)[0]


def read_document_counted(path: Path) -> tuple[Any, int]:
    """Read and parse the JSON output file: ``(document, invalid UTF-8 sequences replaced)``.

    The file is opened without following symlinks and without blocking (a FIFO is refused),
    and read up to `MAX_OUTPUT_BYTES` + 1 bytes. Bytes that are not UTF-8 do not fail the
    output: each invalid sequence becomes U+FFFD (worker/evals/serialize.py `decode_output`),
    counted for the example's note.

    Raises:
        TargetFailed: missing, not a regular file, too big, or not JSON.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise TargetFailed("the command wrote no output file ({output_file})") from None
    except OSError as exc:
        raise TargetFailed(f"cannot open the output file: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TargetFailed("the output file is not a regular file")
        data = handle.read(MAX_OUTPUT_BYTES + 1)
    if len(data) > MAX_OUTPUT_BYTES:
        raise TargetFailed(f"the output file is larger than {MAX_OUTPUT_BYTES} bytes")
    text, invalid = decode_output(data)
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise TargetFailed(f"the output file is not valid UTF-8 JSON: {exc}") from None
    return document, invalid


def _usage(value: Any) -> dict[str, int]:
    if value is None:
        return {}
    valid = isinstance(value, dict) and all(
        key in USAGE_KEYS and isinstance(count, int) and not isinstance(count, bool) and count >= 0
        for key, count in value.items()
    )
    if not valid:
        raise TargetFailed('"usage" must be {"input": tokens, "output": tokens} '
                            f"with non-negative integers, got {str(value)[:200]}")
    return dict(value)


def _cost(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value < 0:
        raise TargetFailed(f'"cost" must be a non-negative number of USD, got {str(value)[:200]}')
    return float(value)
