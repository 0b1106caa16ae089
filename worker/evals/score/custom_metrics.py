"""Custom metrics from Python: a suite's ``metrics:`` (``type: python``) over its example results.

``function: path/to/file.py:fn`` names a function in the repository. Like a custom assertion
(worker/evals/score/custom.py) it never runs in the worker: one confined child process per
metric (the sandbox, scrubbed environment and time limit of command targets,
worker/security/process.py) imports the file and calls it. ``entry_point: name`` names a
function an installed package registers in the entry-point group ``llmgate.metrics``
(``[project.entry-points."llmgate.metrics"]``): code the operator installed, run in the worker.

Each example result is given as a mapping ``{"id", "repeat", "input", "output", "expected",
"passed", "errored", "unscored", "score", "assertions": [{"type", "passed", "score",
"message"}], "latency_ms", "cost_usd", "usage", "tags", "metadata"}`` (``score``: the mean
assertion score, worker/evals/score/example_values.py, or None). With ``per_example: true``
the function is called once per result, ``fn(result)``, and returns a number or None (no
value); the metric ``custom.<name>`` is the mean of the values (a repeated example's
values averaged first by the paired rules) and each result keeps its value for the paired
rules. Otherwise it is called once, ``fn(results)``, and returns the suite's number.

A function that raises, or returns anything else (a bool, a string, NaN), is a configuration
error at the metric's line (the whole suite's report fails or, at base, cannot be decided): a
rule must never read a metric that quietly went missing.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from worker.errors import ConfigError
from worker.evals.score.example_values import example_value
from worker.evals.types import CONFIG_FILENAME, ExampleResult, MetricSpec, Settings
from worker.security import TargetFailed, build_env, run_confined

#: Entry-point group of shared metric functions.
ENTRY_POINT_GROUP = "llmgate.metrics"

#: The child's program: argv = file, function name, per_example (0/1), input JSON, output JSON.
RUNNER = r"""
import importlib.util, json, sys
path, name, per_example, source, target = sys.argv[1:6]
sys.path.insert(0, ".")
spec = importlib.util.spec_from_file_location("llmgate_custom_metric", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
fn = getattr(module, name)
results = json.load(open(source, encoding="utf-8"))
try:
    value = [fn(r) for r in results] if per_example == "1" else fn(results)
    doc = {"value": value}
except Exception as exc:
    doc = {"error": f"{type(exc).__name__}: {exc}"}
json.dump(doc, open(target, "w", encoding="utf-8"), default=str)
"""


def as_mapping(result: ExampleResult) -> dict[str, Any]:
    """Return the mapping a metric function gets for one result (module docstring)."""
    return {"id": result.id, "repeat": result.repeat, "input": result.input,
            "output": result.output, "expected": result.expected, "passed": result.passed,
            "errored": result.errored, "unscored": result.unscored,
            "score": example_value(result, "mean_score"),
            "assertions": [{"type": a.type, "passed": a.passed, "score": a.score,
                            "message": a.message} for a in result.assertions],
            "latency_ms": result.latency_ms, "cost_usd": result.cost_usd,
            "usage": result.usage, "tags": list(result.tags), "metadata": result.metadata}


async def apply_metrics(specs: Sequence[MetricSpec], results: Sequence[ExampleResult],
                        root: Path, settings: Settings
                        ) -> tuple[list[ExampleResult], dict[str, float]]:
    """Run every custom metric on ``results``.

    Args:
        specs: the suite's ``metrics:``.
        results: the suite's scored results.
        root: the checkout whose files the functions are read from.
        settings: the run settings (environment and time limit of the child processes).

    Returns:
        The results (per-example values in ``custom``) and ``custom.<name>`` -> value for
        each metric with a value (a per-example metric without any value is absent).

    Raises:
        ConfigError: at the metric's line, when a function fails or returns no number.
    """
    found: dict[str, float] = {}
    out = list(results)
    if not specs:
        return out, found
    docs = [as_mapping(r) for r in results]
    for spec in specs:
        raw = await _call(spec, docs, root, settings)
        if spec.per_example:
            values = _per_example(spec, raw, len(out))
            out = [replace(r, custom={**r.custom, spec.name: v}) if v is not None else r
                   for r, v in zip(out, values, strict=True)]
            known = [v for v in values if v is not None]
            if known:
                found[f"custom.{spec.name}"] = math.fsum(known) / len(known)
        else:
            found[f"custom.{spec.name}"] = _number(spec, raw, "the suite")
    return out, found


def _per_example(spec: MetricSpec, raw: Any, count: int) -> list[float | None]:
    if not isinstance(raw, list) or len(raw) != count:
        raise _error(spec, f"returned {count} values expected, got {str(raw)[:200]}")
    return [None if v is None else _number(spec, v, f"example {k + 1}")
            for k, v in enumerate(raw)]


def _number(spec: MetricSpec, value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value):
        raise _error(spec, f"must return a finite number for {where}"
                     f"{' (or None)' if spec.per_example else ''}, got {str(value)[:200]}")
    return float(value)


def _error(spec: MetricSpec, message: str) -> ConfigError:
    return ConfigError(CONFIG_FILENAME, spec.line, f"custom metric {spec.name!r}: {message}")


async def _call(spec: MetricSpec, docs: list[dict[str, Any]], root: Path,
                settings: Settings) -> Any:
    if spec.entry_point is not None:
        return _call_entry_point(spec, _entry_point(spec), docs)
    return await _call_file(spec, docs, root, settings)


def _entry_point(spec: MetricSpec) -> Callable[[Any], Any]:
    found = [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
             if ep.name == spec.entry_point]
    if not found:
        raise _error(spec, f"no metric {spec.entry_point!r} is installed in the entry-point "
                     f"group {ENTRY_POINT_GROUP} on the worker")
    fn: Callable[[Any], Any] = found[0].load()
    return fn


def _call_entry_point(spec: MetricSpec, fn: Callable[[Any], Any],
                      docs: list[dict[str, Any]]) -> Any:
    try:
        return [fn(d) for d in docs] if spec.per_example else fn(docs)
    except Exception as exc:  # the function's own failure: the metric's error, by line
        raise _error(spec, f"{type(exc).__name__}: {exc}"[:1000]) from None


async def _call_file(spec: MetricSpec, docs: list[dict[str, Any]], root: Path,
                     settings: Settings) -> Any:
    path_text, _, name = str(spec.function).rpartition(":")
    path = (root / path_text).resolve()
    if not path.is_relative_to(root.resolve()) or not path.is_file():
        raise _error(spec, f"{path_text} is not a file in the repository (fix `function:`)")
    workdir = Path(tempfile.mkdtemp(prefix="llmgate-metric-"))
    try:
        source, target = workdir / "in.json", workdir / "out.json"
        source.write_text(json.dumps(docs, ensure_ascii=False, default=str), encoding="utf-8")
        argv = [sys.executable, "-I", "-B", "-c", RUNNER, str(path), name,
                "1" if spec.per_example else "0", str(source), str(target)]
        timeout_s = settings.timeout_s * (1 + len(docs) // 100)
        try:
            await run_confined(argv, root, build_env(settings.env, workdir), timeout_s, workdir,
                               read_only=True)  # grader code: the checkout is only read
            doc = json.loads(target.read_text(encoding="utf-8"))
        except (TargetFailed, OSError, ValueError) as exc:
            raise _error(spec, f"{exc}"[:1000]) from None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if "error" in doc:
        raise _error(spec, str(doc["error"])[:1000])
    return doc.get("value")
