"""``llmgate power --calibration``: a suite's flip rate from ``llmgate calibrate --format json``.

The record (worker/pipeline/calibrate.py `render_json`) holds ``flip_rates`` (suite -> example
id -> share of consecutive identical runs whose pass/fail changed, only for examples that
changed) and ``history`` (suite -> example id -> pass share per run, for every suite of the
config). A suite that ``history`` names and ``flip_rates`` does not was measured and never
flipped: its noise is 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: How to get a record this module reads.
HOW_TO_MEASURE = "llmgate calibrate --format json --output"


def measured_flip_rate(path: Path, suite: str | None, examples: int | None,
                       n: int) -> tuple[float, str]:
    """Return the flips per direction of ``suite`` in the record at ``path``, and their source.

    Args:
        path: the calibration record (JSON).
        suite: ``--suite``; None picks the record's only suite.
        examples: ``--examples``, the suite's examples (>= 1), or None: as many as the record's
            ``history`` lists for the suite, else ``n``. The mean flip rate is over them all.
        n: ``--n``, the last default of ``examples``.

    Returns:
        Half the mean flip rate (fraction 0-0.5) and a phrase for the output's ``noise:`` line.

    Raises:
        ValueError: an unreadable record, no flip rates in it, malformed rates, a ``suite`` it
            does not have (naming the suites it has), several suites and no ``suite``, or
            ``examples`` below the examples that flipped.
    """
    record = _record(path)
    rates = _flip_rates(path, record)
    history = record.get("history")
    known = list(history) if isinstance(history, dict) else []
    known += [name for name in rates if name not in known]
    name = _pick(path, suite, known)
    flipped = rates.get(name, {})
    listed = history.get(name) if isinstance(history, dict) else None
    if examples is None:
        examples = len(listed) if isinstance(listed, dict) and listed else max(n, len(flipped))
    elif examples < len(flipped):
        raise ValueError(f"--examples {examples}: the calibration {path} has {len(flipped)} "
                         f"examples of {name} that flipped, so the suite has at least as many")
    mean = sum(flipped.values()) / examples
    runs = record.get("runs")
    over = f" in {runs} identical runs" if isinstance(runs, int) and not isinstance(runs, bool) \
        else " between identical runs"
    return mean / 2, f"measured: {len(flipped)} of {examples} examples flipped{over}"


def _record(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ValueError(f"cannot read the calibration {path}: {err.strerror}") from None
    except ValueError as err:
        raise ValueError(f"cannot read the calibration {path}: not JSON ({err})") from None
    if not isinstance(record, dict):
        raise ValueError(f"cannot read the calibration {path}: not a record of "
                         f"`{HOW_TO_MEASURE} {path}` (a JSON object)")
    return record


def _flip_rates(path: Path, record: dict[str, Any]) -> dict[str, dict[str, float]]:
    if "flip_rates" not in record:
        raise ValueError(f"the calibration {path} has no flip rates (no `flip_rates`): measure "
                         f"them with `{HOW_TO_MEASURE} {path}`")
    rates = record["flip_rates"]
    if not isinstance(rates, dict) or not all(
            isinstance(rows, dict) and all(_share(v) for v in rows.values())
            for rows in rates.values()):
        raise ValueError(f"the calibration {path}: `flip_rates` must map each suite to example "
                         "ids and their flip rates from 0 to 1")
    return {str(s): {str(i): float(v) for i, v in rows.items()} for s, rows in rates.items()}


def _share(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1


def _pick(path: Path, suite: str | None, known: list[str]) -> str:
    from worker.pipeline import no_such_suite  # not at import time: --help stays fast

    if suite is not None:
        if suite not in known:
            raise ValueError(no_such_suite([suite], known, f"the calibration {path}"))
        return suite
    if len(known) > 1:
        raise ValueError(f"the calibration {path} has several suites ({', '.join(known)}): "
                         "give --suite")
    return known[0] if known else ""
