"""Read a calibration record's ``history`` back (pure): the pass shares of its A/A runs.

worker/pipeline/calibrate.py writes the record (`render_json`: the file of ``llmgate calibrate
--format json``, or what the scheduled calibration keeps in Redis); the gate
(worker/gate/calibration.py) and ``llmgate run --calibration`` (worker/cli/main.py) read it
here into a gate's ``history``, without loading the engine that made it.
"""

from __future__ import annotations

from collections.abc import Mapping


def history_of(record: Mapping[str, object]) -> dict[str, dict[str, dict[str, list[float]]]]:
    """Return a calibration record's pass shares as a gate's ``history`` (pure).

    Args:
        record: what `render_json` wrote (the file of ``llmgate calibrate --format json``, or
            the record the scheduled calibration keeps in Redis).

    Returns:
        suite -> ``{"pass_rate": {example id: pass share per run}}``
        (worker/evals/context.py ``EvalContext.history``); empty for a record without
        ``history`` (written before it was recorded).

    Raises:
        ValueError: ``history`` is not suite -> id -> list of numbers in 0-1.
    """
    found = record.get("history", {})
    if not isinstance(found, dict):
        raise ValueError("calibration record: history must be an object")
    history: dict[str, dict[str, dict[str, list[float]]]] = {}
    for suite, rows in found.items():
        if not isinstance(rows, dict):
            raise ValueError(f"calibration record: history of suite {suite} must be an object")
        values = {str(i): _shares(suite, str(i), v) for i, v in rows.items()}
        history[str(suite)] = {"pass_rate": values}
    return history


def _shares(suite: str, example_id: str, values: object) -> list[float]:
    if not isinstance(values, list) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1
            for v in values):
        raise ValueError(f"calibration record: history of {suite} {example_id} must be a list "
                         "of pass shares from 0 to 1")
    return [float(v) for v in values]
