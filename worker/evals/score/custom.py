"""Custom Python assertions: ``type: python`` with ``function`` or ``entry_point``.

``function: path/to/file.py:fn`` names a function in the repository. It comes from the pull
request, so it never runs in the worker: one child process per suite and assertion (the same
sandbox, scrubbed environment and timeout handling as command targets,
worker/security/process.py) imports the file and calls it once per example, reading JSONL in
and writing JSONL out.

``entry_point: name`` names a function registered by an installed package in the entry-point
group ``llmgate.assertions`` (``[project.entry-points."llmgate.assertions"]``): code the
operator installed on the worker, so it runs in the worker process.

Either is called as ``fn(output, context)`` with ``context = {"input", "expected", "vars",
"id"}`` and returns a bool (pass/fail), a number (a score 0-1 that passes at ``threshold``,
default 0.5) or a mapping ``{"pass": bool, "score": number?, "reason": str?}``. An exception or
another return value errors that example's assertion (unscored).
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from worker.errors import ConfigError
from worker.evals.score.custom_spec import ENTRY_POINT_GROUP, FUNCTION_REF
from worker.evals.types import AssertionResult, AssertionSpec, Example, Settings
from worker.security import TargetFailed, build_env, run_confined

Item = tuple[Example, Any]

#: The child's program: argv = file, function name, input JSONL, output JSONL.
RUNNER = r"""
import importlib.util, json, sys, traceback
path, name, source, target = sys.argv[1:5]
sys.path.insert(0, ".")
spec = importlib.util.spec_from_file_location("llmgate_custom_assertion", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
fn = getattr(module, name)
with open(source, encoding="utf-8") as inp, open(target, "w", encoding="utf-8") as out:
    for line in inp:
        item = json.loads(line)
        try:
            value = fn(item["output"], item["context"])
            json.dump({"value": value}, out, default=str)
        except Exception as exc:
            json.dump({"error": f"{type(exc).__name__}: {exc}"}, out)
        out.write("\n")
"""


def to_result(value: Any, threshold: float) -> AssertionResult:
    """Turn a custom function's return value into an assertion result (pure).

    A NaN or infinite number (returned, or as ``score``) is kept as the score, unclipped, so
    the scorer fails the example on it (worker/evals/score/scoring.py) instead of clipping it to 0
    or 1.
    """
    if isinstance(value, bool):
        return AssertionResult("python", value, float(value), "" if value else "returned False")
    if isinstance(value, float) and not math.isfinite(value):
        return AssertionResult("python", False, value, f"returned {value!r}")
    if isinstance(value, int | float):
        score = min(1.0, max(0.0, float(value)))
        passed = score >= threshold
        return AssertionResult("python", passed, score,
                               "" if passed else f"score {score:.3f} < {threshold:g}")
    if isinstance(value, dict) and isinstance(value.get("pass"), bool):
        passed = value["pass"]
        score = value.get("score", float(passed))
        if isinstance(score, bool) or not isinstance(score, int | float):
            score = float(passed)
        reason = str(value.get("reason", "")) or ("" if passed else "returned pass: false")
        score = float(score)
        return AssertionResult("python", passed, min(1.0, max(0.0, score))
                               if math.isfinite(score) else score, "" if passed else reason[:500])
    return AssertionResult("python", False, 0.0, "custom assertion error: it must return a "
                           f"bool, a number or {{pass, score?, reason?}}, got {str(value)[:200]}",
                           errored=True)


def _context(example: Example) -> dict[str, Any]:
    return {"input": example.input, "expected": example.expected, "vars": example.vars,
            "id": example.id}


async def run_python(spec: AssertionSpec, items: list[Item], root: Path,
                     settings: Settings) -> list[AssertionResult]:
    """Run one ``python`` assertion on every (example, output) pair, in order."""
    threshold = float(spec.params.get("threshold", 0.5))
    if "entry_point" in spec.params:
        return _run_entry_point(str(spec.params["entry_point"]), items, threshold)
    return await _run_file(str(spec.params["function"]), items, root, settings, threshold)


def _run_entry_point(name: str, items: list[Item], threshold: float) -> list[AssertionResult]:
    found = [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
             if ep.name == name]
    if not found:
        raise ConfigError("", None, f"no assertion {name!r} is installed in the entry-point "
                          f"group {ENTRY_POINT_GROUP} on the worker")
    fn = found[0].load()
    results = []
    for example, output in items:
        try:
            results.append(to_result(fn(output, _context(example)), threshold))
        except Exception as exc:  # the function's own failure errors this example only
            results.append(AssertionResult("python", False, 0.0, f"custom assertion error: "
                                           f"{type(exc).__name__}: {exc}"[:500], errored=True))
    return results


async def _run_file(function: str, items: list[Item], root: Path, settings: Settings,
                    threshold: float) -> list[AssertionResult]:
    match = FUNCTION_REF.match(function)
    assert match is not None  # validated at config time
    path = (root / match["path"]).resolve()
    if not path.is_relative_to(root.resolve()) or not path.is_file():
        raise ConfigError(match["path"], None, "custom assertion file not found in the "
                          "repository (fix `function:`)")
    workdir = Path(tempfile.mkdtemp(prefix="llmgate-python-"))
    try:
        source, target = workdir / "in.jsonl", workdir / "out.jsonl"
        source.write_text("".join(json.dumps({"output": out, "context": _context(ex)},
                                             ensure_ascii=False, default=str) + "\n"
                                  for ex, out in items), encoding="utf-8")
        argv = [sys.executable, "-I", "-B", "-c", RUNNER, str(path), match["name"], str(source),
                str(target)]
        timeout_s = settings.timeout_s * (1 + len(items) // 100)
        try:
            await run_confined(argv, root, build_env(settings.env, workdir), timeout_s, workdir,
                               read_only=True)  # grader code: the checkout is only read
            lines = target.read_text(encoding="utf-8").splitlines()
        except (TargetFailed, OSError) as exc:
            error = f"custom assertion error: {exc}"[:1000]
            return [AssertionResult("python", False, 0.0, error, errored=True) for _ in items]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return [_line_result(lines[i] if i < len(lines) else "", threshold)
            for i in range(len(items))]


def _line_result(line: str, threshold: float) -> AssertionResult:
    try:
        doc = json.loads(line)
    except ValueError:
        doc = {"error": "no result"}
    if "error" in doc:
        return AssertionResult("python", False, 0.0, f"custom assertion error: {doc['error']}"
                               [:500], errored=True)
    return to_result(doc.get("value"), threshold)
