"""Structured target output: the JSON object a command target writes for one example (pure).

``{"output": any, "usage": {"input": n, "output": n, "cached_input": n}, "cost": usd,
"latency_ms": ms, "contexts": [...], "retrieved_ids": [...], "trace": {...}}``: only ``output`` is
required (``trace``: an agent's tool calls and counts, worker/evals/score/traces.py).
The latency scored is never below the engine's own measurement (the command's wall time, or a
batch's wall time divided by its examples): a ``latency_ms`` below it is raised to it, so a
pull request's code cannot report itself fast (a field case: a bot that slept 1.5 s per ticket
wrote ``"latency_ms": 5`` and passed a ``latency_p90`` gate). A larger ``latency_ms`` is kept
(a target may add time the engine cannot see). ``usage`` and ``cost`` cannot be measured for a
command, so they are the target's own claim (README says so).
Other keys are ignored. This is where a command target's output enters: any text in it that
is not valid Unicode (a lone surrogate from a JSON escape like ``"\\ud800"``, or bytes that
were not UTF-8, counted by the reader) is replaced by U+FFFD and noted on the example
(worker/evals/serialize.py), so every report, the baseline store and the cache can write it.
"""

from __future__ import annotations

import math
from typing import Any

from worker.evals.score.traces import TraceError, parse_trace
from worker.evals.serialize import replaced_note, valid_value
from worker.evals.types import TargetOutput

USAGE_KEYS = ("input", "output", "cached_input")
#: Most ``contexts`` or ``retrieved_ids`` items kept.
MAX_ITEMS = 1000


class OutputError(Exception):
    """The document is not a valid target output; the message says what is wrong."""


def parse_output_document(document: Any, measured_ms: float,
                          invalid_bytes: int = 0) -> TargetOutput:
    """Validate one output document and return it as a `TargetOutput`.

    Args:
        document: the parsed JSON.
        measured_ms: the engine's measurement (milliseconds), used when the document has no
            ``latency_ms`` or a smaller one.
        invalid_bytes: how many invalid UTF-8 sequences the reader replaced by U+FFFD in the
            text the document was parsed from (worker/evals/serialize.py `decode_output`);
            with the lone surrogates replaced here, they make the output's note.

    Raises:
        OutputError: not an object with ``output``, or a malformed optional field.
    """
    if not isinstance(document, dict) or "output" not in document:
        raise OutputError('the output must be a JSON object with an "output" key')
    document, surrogates = valid_value(document)
    replaced = invalid_bytes + surrogates
    latency = document.get("latency_ms")
    if latency is not None and not _non_negative(latency):
        raise OutputError(f'"latency_ms" must be a non-negative number, got {str(latency)[:100]}')
    cost = document.get("cost")
    if cost is not None and not _non_negative(cost):
        raise OutputError(f'"cost" must be a non-negative number of USD, got {str(cost)[:200]}')
    try:
        trace = parse_trace(document.get("trace"))
    except TraceError as exc:
        raise OutputError(str(exc)) from None
    return TargetOutput(
        document["output"], None,
        measured_ms if latency is None else max(float(latency), measured_ms),
        _usage(document.get("usage")), None if cost is None else float(cost),
        contexts=tuple(_items(document.get("contexts"), "contexts")),
        retrieved_ids=tuple(str(i) for i in _items(document.get("retrieved_ids"),
                                                      "retrieved_ids")),
        trace=trace, notes=(replaced_note(replaced),) if replaced else ())


def _non_negative(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) \
        and math.isfinite(value) and value >= 0


def _usage(value: Any) -> dict[str, int]:
    if value is None:
        return {}
    valid = isinstance(value, dict) and all(
        key in USAGE_KEYS and isinstance(n, int) and not isinstance(n, bool) and n >= 0
        for key, n in value.items())
    if not valid:
        raise OutputError('"usage" must be {"input": tokens, "output": tokens} with '
                          f"non-negative integers, got {str(value)[:200]}")
    return dict(value)


def _items(value: Any, name: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise OutputError(f'"{name}" must be a list')
    if name == "retrieved_ids" and not all(
            isinstance(i, str | int) and not isinstance(i, bool) for i in value):
        raise OutputError('"retrieved_ids" must be a list of strings or integers')
    return value[:MAX_ITEMS]
