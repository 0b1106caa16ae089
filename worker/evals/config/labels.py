"""Read a file of human labels for judge calibration, naming the file and line of every problem.

One JSON object a line: the answer a person rated and their rating::

    {"id": "l1", "output": "Refund sent.", "label": "pass", "input": "Where is my refund?"}
    {"id": "l2", "output": "No idea.", "score": 2, "criterion": "accuracy"}

``id`` and ``output`` are required, and exactly one of ``label`` (``pass``/``fail``, or true/
false) or ``score`` (an integer 1-5, for judges on the ``1-5`` scale); ``criterion`` names the
judge it rates (an ``llm_judge``'s ``name`` or a ``composite`` criterion; worker/evals/run/
judge_calibration.py), and ``input`` and ``expected`` are shown to the judge as a dataset
example's are. Blank lines are skipped; ids are unique.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.errors import ConfigError
from worker.evals.config.files import decode_utf8, read_repo_file, refuse_stray_bom
from worker.evals.config.spelling import as_data

#: Largest labels file read, bytes (16 MiB), and most rows.
MAX_LABELS_BYTES = 16 << 20
MAX_LABELS = 20_000
LABEL_KEYS = ("id", "output", "label", "score", "criterion", "input", "expected")


@dataclass(frozen=True)
class LabelRow:
    """One human rating.

    Attributes:
        id, line: the row's id and 1-based line.
        output: the answer rated (any JSON value).
        rating: 0 (fail) or 1 (pass) for a ``label``; 1-5 for a ``score``.
        graded: True for a ``score`` (1-5), False for a ``label``.
        criterion: the judge it rates, or "" (the suite's only judge).
        input, expected: shown to the judge as an example's.
    """

    id: str
    line: int
    output: Any
    rating: int
    graded: bool
    criterion: str = ""
    input: Any = None
    expected: Any = None


def load_labels(root: Path, rel_path: str) -> tuple[LabelRow, ...]:
    """Read the labels file ``rel_path`` of the checkout at ``root``.

    Raises:
        ConfigError: the file is missing, outside ``root``, over `MAX_LABELS_BYTES`, empty,
            or a line is invalid (with its line).
    """
    text = decode_utf8(read_repo_file(root, rel_path, MAX_LABELS_BYTES), rel_path)
    rows = parse_labels(text, rel_path)
    if not rows:
        raise ConfigError(rel_path, None, "the labels file has no rows: add one JSON object "
                          "per line with id, output and label or score")
    return rows


def parse_labels(text: str, path: str) -> tuple[LabelRow, ...]:
    """Parse the text of a labels file (pure; rules in the module doc).

    Raises:
        ConfigError: at the offending line.
    """
    rows: list[LabelRow] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        row = _row(raw, number, path)
        if row.id in seen:
            raise ConfigError(path, number, f"duplicate id {row.id!r} (first at line "
                              f"{seen[row.id]})")
        seen[row.id] = number
        rows.append(row)
        if len(rows) > MAX_LABELS:
            raise ConfigError(path, number, f"more than {MAX_LABELS} labels")
    return tuple(rows)


def _row(raw: str, line: int, path: str) -> LabelRow:
    refuse_stray_bom(raw, path, line)
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(path, line, f"not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigError(path, line, "each line must be a JSON object")
    unknown = [k for k in doc if k not in LABEL_KEYS]
    if unknown:
        raise ConfigError(path, line, f"unknown key {unknown[0]!r} (known keys: "
                          f"{', '.join(LABEL_KEYS)})")
    ident = doc.get("id")
    if isinstance(ident, bool) or not isinstance(ident, str | int) or str(ident) == "":
        raise ConfigError(path, line, "needs an `id` (a string or an integer)")
    if "output" not in doc:
        raise ConfigError(path, line, "needs `output`: the answer the person rated")
    rating, graded = _rating(doc, line, path)
    criterion = doc.get("criterion", "")
    if not isinstance(criterion, str):
        raise ConfigError(path, line, "`criterion` must be a string (a judge's name)")
    return LabelRow(str(ident), line, doc["output"], rating, graded, criterion,
                    doc.get("input"), doc.get("expected"))


def _rating(doc: dict[str, Any], line: int, path: str) -> tuple[int, bool]:
    if ("label" in doc) == ("score" in doc):
        raise ConfigError(path, line, "needs exactly one of `label` (pass or fail) or "
                          "`score` (an integer 1-5)")
    if "label" in doc:
        label = doc["label"]
        if isinstance(label, bool):
            return int(label), False
        if isinstance(label, str) and label.strip().lower() in ("pass", "fail"):
            return int(label.strip().lower() == "pass"), False
        raise ConfigError(path, line, f"`label` must be pass or fail, got {as_data(label)}")
    score = doc["score"]
    if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 5:
        raise ConfigError(path, line, "`score` must be an integer from 1 to 5, got "
                          f"{as_data(score)}")
    return score, True
