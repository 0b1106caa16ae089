"""Batch command targets (``batch: true``): one process answers every example of a suite.

For pipelines where start-up dominates (loading a model, an index): llmgate writes one JSONL
file with a line ``{"id", "input", "vars"}`` per example (never ``expected``) and runs the
command once, with the same sandbox and scrubbed environment as a per-example command
(worker/evals/run/targets.py). The command writes a JSONL file of one structured output per line,
each with the example's ``id`` (worker/evals/score/outputs.py: ``output``, ``usage``, ``cost``,
``latency_ms``, ``contexts``, ``retrieved_ids``), in any order.

An example with no line, or an invalid line, errors alone; a crash or timeout errors them all
with the command's message. The batch may run ``timeout * examples / concurrency`` seconds (at
least ``timeout``): as long as per-example runs would take at the configured concurrency. An
example's latency is its line's ``latency_ms``, else the batch's wall time divided by the
number of examples.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from worker.evals.run import targets
from worker.evals.score import OutputError, parse_output_document
from worker.evals.serialize import decode_output
from worker.evals.types import CommandTarget, Example, Settings, TargetOutput
from worker.security import TargetFailed, build_env, run_confined


def batch_timeout_s(settings: Settings, examples: int) -> float:
    """Return the batch's time limit, seconds (see the module docstring)."""
    return max(settings.timeout_s, settings.timeout_s * examples / settings.concurrency)


async def run_batch(target: CommandTarget, examples: Sequence[Example], cwd: Path,
                    settings: Settings) -> list[TargetOutput]:
    """Run the batch command once for ``examples``; return one output per example, in order.

    Never raises for a misbehaving command: its failure is every example's error. A batch
    that left processes running after it exited gives each output a note (they were ended,
    `worker.security.process.run_confined`).
    """
    if not examples:
        return []
    workdir = Path(tempfile.mkdtemp(prefix="llmgate-batch-"))
    started = time.perf_counter()
    try:
        input_path, output_path = workdir / "inputs.jsonl", workdir / "outputs.jsonl"
        input_path.write_text("".join(
            json.dumps({"id": e.id, "input": e.input, "vars": e.vars}, ensure_ascii=False) + "\n"
            for e in examples), encoding="utf-8")
        argv = targets.build_argv(target.command, input_path, output_path)
        finished = await run_confined(argv, cwd, build_env(settings.env, workdir),
                                      batch_timeout_s(settings, len(examples)), workdir)
        lines = _read_lines(output_path, len(examples))
    except TargetFailed as exc:
        elapsed = (time.perf_counter() - started) * 1000
        return [TargetOutput(None, f"the batch failed: {exc}", elapsed / len(examples),
                             error_kind="target") for _ in examples]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    share_ms = (time.perf_counter() - started) * 1000 / len(examples)
    by_id = _index(lines)
    outputs = [_output(by_id.get(example.id), share_ms) for example in examples]
    if finished.note:  # the batch left processes behind: every example it answered says so
        outputs = [replace(o, notes=(*o.notes, finished.note)) for o in outputs]
    return outputs


def _read_lines(path: Path, count: int) -> list[tuple[str, int]]:
    """Read the batch's output file: each line (split at ``\\n``) decoded with its invalid UTF-8
    sequences replaced by U+FFFD, and how many (for the example's note)."""
    limit = targets.MAX_OUTPUT_BYTES * max(count, 1)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        raise TargetFailed("the command wrote no output file ({output_file})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TargetFailed("the output file is not a regular file")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise TargetFailed(f"the output file is larger than {limit} bytes")
    return [decode_output(line) for line in data.split(b"\n")]


def _index(lines: list[tuple[str, int]]) -> dict[str, Any]:
    """Map example id -> parsed line (or the error text of a line that names an id)."""
    by_id: dict[str, Any] = {}
    for number, (line, invalid) in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            document = json.loads(line)
        except (ValueError, RecursionError):
            continue  # no id to blame: its example reports a missing line
        if isinstance(document, dict) and isinstance(document.get("id"), str | int) \
                and str(document["id"]) not in by_id:
            document["_line"], document["_invalid"] = number, invalid
            by_id[str(document["id"])] = document
    return by_id


def _output(document: Any, share_ms: float) -> TargetOutput:
    if document is None:
        return TargetOutput(None, "the batch wrote no valid output line for this id",
                            share_ms, error_kind="target")
    try:
        return parse_output_document({k: v for k, v in document.items()
                                      if k not in ("_line", "_invalid")}, share_ms,
                                     document["_invalid"])
    except OutputError as exc:
        return TargetOutput(None, f"output line {document['_line']}: {exc}", share_ms,
                            error_kind="target")
