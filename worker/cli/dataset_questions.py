"""``llmgate dataset check`` on the multiple-choice dataset of a consistency suite (issue 33).

A consistency suite (docs/consistency.md) reads questions, ``{id, stem, options: [{label, text,
is_correct}]}`` (JSON, JSONL or CSV: worker/evals/config/mc_dataset.py), not examples. ``check``
reads such a file as the suite does (a malformed question is refused, its line named) when the
``--config`` suite that names it is a consistency suite, or when the file is no examples file but
reads as questions (its first record has a ``stem``: a malformed question is then refused as
questions are); it reports questions with the same stem and a correct label held by more
than `worker.cli.dataset.MAJORITY` of the questions (a model that always answers that label
would score well: the label balance of an examples file).
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path
from typing import Any

from worker.errors import ConfigError


def consistency_suite(config: Path | None, dataset: Path) -> bool:
    """Whether a suite of ``config`` that names ``dataset`` is a consistency suite.

    Raises:
        ConfigError, OSError: ``config`` cannot be read or is invalid.
    """
    if config is None:
        return False
    from worker.evals.config import parse_config

    parsed = parse_config(config.read_text(encoding="utf-8"), config.name)
    folder = config.absolute().parent
    return any(s.consistency is not None for s in parsed.suites
               if (folder / s.dataset).resolve() == dataset.resolve())


def read_questions(path: Path) -> tuple[Any, ...]:
    """Parse ``path`` as a multiple-choice dataset (by its extension).

    Raises:
        ConfigError: a question is malformed (its line named), or there is none.
        OSError: the file cannot be read.
    """
    from worker.evals.config import parse_questions

    return parse_questions(path.read_text(encoding="utf-8-sig"), path.as_posix())


def question_findings(questions: tuple[Any, ...], majority: float) -> list[str]:
    """Return one line per finding about ``questions`` (`MCQuestion`s; module docstring; pure)."""
    found: list[str] = []
    stems: dict[str, int] = {}
    for question in questions:
        stem = " ".join(question.stem.split()).casefold()
        if stem in stems:
            found.append(f"line {question.line}: question {question.id!r} has the same stem as "
                         f"line {stems[stem]}")
        stems.setdefault(stem, question.line)
    labels = Counter(q.correct.label for q in questions)
    if labels and len(questions) >= 5:
        label, count = labels.most_common(1)[0]
        if count / len(questions) > majority:
            found.append(f"label balance: {count} of {len(questions)} questions have "
                         f"{label!r} as the correct option")
    return found


def questions_or_error(path: Path, error: ConfigError) -> tuple[Any, ...]:
    """Return ``path`` read as questions, or raise: the questions' error when its first record
    has a ``stem`` (it is meant as questions), else ``error`` (the examples reader's).

    Raises:
        ConfigError: as above.
        OSError: the file cannot be read.
    """
    try:
        return read_questions(path)
    except ConfigError:
        if _has_stem(path.read_text(encoding="utf-8-sig"), path.suffix):
            raise
        raise error from None


def _has_stem(text: str, suffix: str) -> bool:
    """Whether the first record of a dataset's ``text`` has a ``stem`` key (CSV: column)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return False
    if suffix == ".csv":
        return "stem" in next(csv.reader(lines[:1]))
    try:
        first = json.loads(lines[0]) if suffix == ".jsonl" else json.loads(text)[0]
    except (ValueError, LookupError, TypeError):
        return False
    return isinstance(first, dict) and "stem" in first
