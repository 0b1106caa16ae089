"""Read a multiple-choice dataset (JSON, JSONL or CSV) of a consistency suite (pure but `load`).

One question is ``{"id": "q1", "stem": "2 + 2 = ?", "options": [{"label": "A", "text": "3",
"is_correct": false}, {"label": "B", "text": "4", "is_correct": true}]}``: a JSON list of such
objects (``.json``), one a line (``.jsonl``, blank lines skipped), or CSV (``.csv``) with the
columns ``id``, ``stem``, ``option_a`` ... ``option_z`` (empty cells skipped; the column's
letter, upper-cased, is the label) and ``correct`` (the correct option's label), the layout
the llm-consistency package reads too. Every question needs at least two options with
distinct, non-empty labels, distinct texts (compared case-insensitively, runs of white space as
one: an answer naming a text shared by two options could not say which it means) and exactly
one correct option. Errors name the file and line (for
JSON: the line where the question's object starts).
"""

from __future__ import annotations

import csv
import io
import json
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.errors import ConfigError
from worker.evals.config.files import MAX_DATASET_BYTES, MAX_EXAMPLES, decode_utf8, read_repo_file
from worker.evals.config.spelling import as_data

QUESTION_KEYS = ("id", "stem", "options")
OPTION_KEYS = ("label", "text", "is_correct")


@dataclass(frozen=True)
class MCOption:
    """One answer option: its label as the dataset gives it, its text, whether it is right."""

    label: str
    text: str
    is_correct: bool


@dataclass(frozen=True)
class MCQuestion:
    """One multiple-choice question, with the 1-based line it starts on in its file."""

    id: str
    stem: str
    options: tuple[MCOption, ...]
    line: int

    @property
    def correct(self) -> MCOption:
        """The one correct option (a parsed question has exactly one)."""
        return next(o for o in self.options if o.is_correct)


def load_questions(root: Path, rel_path: str) -> tuple[MCQuestion, ...]:
    """Read the multiple-choice dataset ``rel_path`` of the checkout at ``root``.

    Raises:
        ConfigError: the file is missing, outside the repository, too large, not UTF-8, has
            no question, or a question is malformed (see the module docstring).
    """
    text = decode_utf8(read_repo_file(root, rel_path, MAX_DATASET_BYTES), rel_path)
    return parse_questions(text, rel_path)


def parse_questions(text: str, path: str) -> tuple[MCQuestion, ...]:
    """Parse the text of a multiple-choice dataset by its file's extension (pure).

    Returns:
        The questions in file order.

    Raises:
        ConfigError: as `load_questions`.
    """
    if path.endswith(".csv"):
        rows = _csv_rows(text, path)
    elif path.endswith(".jsonl"):
        rows = [(n, _json(raw, path, n)) for n, raw in enumerate(text.split("\n"), start=1)
                if raw.strip()]
    else:
        rows = _json_rows(text, path)
    if not rows:
        raise ConfigError(path, None, "the dataset has no questions")
    if len(rows) > MAX_EXAMPLES:
        raise ConfigError(path, None, f"more than {MAX_EXAMPLES} questions")
    questions: dict[str, MCQuestion] = {}
    for line, doc in rows:
        question = _question(doc, path, line)
        if question.id in questions:
            raise ConfigError(path, line, f"duplicate id {question.id!r} "
                              f"(first at line {questions[question.id].line})")
        questions[question.id] = question
    return tuple(questions.values())


def _json(raw: str, path: str, line: int) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(path, line, f"invalid JSON: {str(exc)[:200]}") from None


def _json_rows(text: str, path: str) -> list[tuple[int, Any]]:
    doc = _json(text, path, 1)
    if not isinstance(doc, list):
        raise ConfigError(path, 1, "a .json dataset must be a list of question objects "
                          "(or use .jsonl, one object a line)")
    starts = _object_lines(text)
    return [(starts[i] if i < len(starts) else 1, item) for i, item in enumerate(doc)]


def _object_lines(text: str) -> list[int]:
    """Lines where each top-level object of a JSON list opens (outside strings)."""
    lines, depth, line, in_string, escaped = [], 0, 1, False, False
    for char in text:
        if char == "\n":
            line += 1
        if in_string:
            escaped = not escaped and char == "\\"
            in_string = escaped or char != '"'
            continue
        if char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth == 2 and char == "{":
                lines.append(line)
        elif char in "]}":
            depth -= 1
    return lines


def _csv_rows(text: str, path: str) -> list[tuple[int, Any]]:
    try:
        reader = csv.DictReader(io.StringIO(text))
        rows = list(reader)
    except csv.Error as exc:
        raise ConfigError(path, None, f"invalid CSV: {exc}") from None
    out = []
    for number, row in enumerate(rows, start=2):
        correct = (row.get("correct") or "").strip().upper()
        options = [{"label": letter.upper(), "text": value.strip(),
                    "is_correct": letter.upper() == correct}
                   for letter in string.ascii_lowercase
                   if (value := row.get(f"option_{letter}") or "").strip()]
        if correct and not any(o["is_correct"] for o in options):
            raise ConfigError(path, number, f"`correct` is {correct!r}, which no option_* "
                              "column of this row holds")
        out.append((number, {"id": row.get("id"), "stem": row.get("stem"), "options": options}))
    return out


def _question(doc: Any, path: str, line: int) -> MCQuestion:
    if not isinstance(doc, dict):
        raise ConfigError(path, line, "each question must be an object with `id`, `stem` and "
                          "`options`")
    unknown = sorted(set(doc) - set(QUESTION_KEYS))
    if unknown:
        raise ConfigError(path, line, f"unknown key {unknown[0]!r} (known keys: "
                          f"{', '.join(QUESTION_KEYS)})")
    qid, stem = doc.get("id"), doc.get("stem")
    if isinstance(qid, bool) or not isinstance(qid, str | int) or str(qid).strip() == "":
        raise ConfigError(path, line, "`id` must be a non-empty string or integer, got "
                          f"{as_data(qid)}")
    if not isinstance(stem, str) or not stem.strip():
        raise ConfigError(path, line, "`stem` must be a non-empty string")
    options = _options(doc.get("options"), path, line)
    return MCQuestion(str(qid).strip(), stem.strip(), options, line)


def _options(value: Any, path: str, line: int) -> tuple[MCOption, ...]:
    if not isinstance(value, list) or len(value) < 2:
        raise ConfigError(path, line, "`options` must be a list of at least two options")
    options = []
    for item in value:
        if not isinstance(item, dict) or set(item) - set(OPTION_KEYS):
            raise ConfigError(path, line, "each option must be {label, text, is_correct}")
        label, text, right = item.get("label"), item.get("text"), item.get("is_correct", False)
        if not isinstance(label, str) or not label.strip() or not isinstance(text, str) \
                or not text.strip() or not isinstance(right, bool):
            raise ConfigError(path, line, "each option needs a non-empty `label` and `text` "
                              "and a true/false `is_correct`")
        options.append(MCOption(label.strip(), text.strip(), right))
    if len({o.label for o in options}) != len(options):
        raise ConfigError(path, line, "option labels must be distinct")
    _check_distinct_texts(options, path, line)
    if sum(o.is_correct for o in options) != 1:
        raise ConfigError(path, line, "exactly one option must have `is_correct: true`")
    return tuple(options)


def _check_distinct_texts(options: list[MCOption], path: str, line: int) -> None:
    seen: dict[str, str] = {}
    for o in options:
        key = " ".join(o.text.casefold().split())
        if key in seen:
            raise ConfigError(path, line, f"options {seen[key]} and {o.label} have the same "
                              f"text {o.text!r}: an answer naming it could mean either")
        seen[key] = o.label
