"""The pure parts of ``llmgate migrate``: splits, prompt variants, the optimiser's messages and
the PR-ready diff (worker/pipeline/migration.py runs them).

Splits: the dataset's rows shuffled with ``random.Random(seed)``, then half for *train*, a
quarter for *validation*, the rest for *holdout* (each at least one row). Variants of the
current prompt: *few-shot* (the prompt followed by ``k`` train rows with a reference, picked
with the same seeded generator) and the optimiser model's *rewrites*. A rewrite must keep every
``{{ variable }}`` the prompt uses, else it is dropped (it could not answer the examples).
"""

from __future__ import annotations

import difflib
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from worker.evals.config import split_lines

#: Fractions of the rows for train and validation (holdout: the rest).
TRAIN_FRACTION, VALIDATION_FRACTION = 0.5, 0.25
#: Fewest rows a migration can split three ways.
MIN_ROWS = 3
#: Few-shot sizes tried.
SHOTS = (2, 4)
#: Line separating the optimiser's rewrites in its answer.
SEPARATOR = "=== VARIANT ==="
#: Failing train rows shown to the optimiser.
SHOWN_FAILURES = 5
_VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][\w.]*)\s*\}\}")
OPTIMISER_SYSTEM = (
    "You improve prompt templates for a new language model. Keep every {{ variable }} of the "
    "template exactly. Answer with {count} rewritten templates, each after a line "
    f"'{SEPARATOR}', and nothing else.")


@dataclass(frozen=True)
class Splits:
    """Raw JSONL rows (dicts) of each split, in shuffled order."""

    train: tuple[dict[str, Any], ...]
    validation: tuple[dict[str, Any], ...]
    holdout: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class Variant:
    """A candidate prompt: name (``current``, ``few-shot k``, ``rewrite i``) and its text."""

    name: str
    text: str


def split_rows(rows: Sequence[dict[str, Any]], seed: int) -> Splits:
    """Shuffle ``rows`` with ``random.Random(seed)`` and split them (module doc).

    Raises:
        ValueError: fewer than `MIN_ROWS` rows.
    """
    if len(rows) < MIN_ROWS:
        raise ValueError(f"the suite has {len(rows)} examples: a migration needs at least "
                         f"{MIN_ROWS} (train, validation and holdout)")
    order = list(rows)
    random.Random(seed).shuffle(order)  # noqa: S311 (a seeded split, not a secret)
    n = len(order)
    train = max(1, int(n * TRAIN_FRACTION))
    validation = max(1, min(n - train - 1, int(n * VALIDATION_FRACTION)))
    return Splits(tuple(order[:train]), tuple(order[train:train + validation]),
                  tuple(order[train + validation:]))


def few_shot(prompt: str, train: Sequence[dict[str, Any]], seed: int) -> list[Variant]:
    """The few-shot variants: the prompt with ``k`` seeded train rows that have a reference."""
    usable = [r for r in train if r.get("expected") is not None and r.get("input") is not None]
    found = []
    for k in SHOTS:
        if len(usable) < k:
            break
        shots = random.Random(seed + k).sample(usable, k)  # noqa: S311 (seeded, no secret)
        examples = "\n\n".join(f"Input: {_text(r['input'])}\nAnswer: {_text(r['expected'])}"
                               for r in shots)
        found.append(Variant(f"few-shot {k}", f"{prompt.rstrip()}\n\nExamples:\n\n{examples}\n"))
    return found


def optimiser_messages(prompt: str, failures: Sequence[dict[str, Any]],
                       count: int) -> list[dict[str, str]]:
    """The optimiser's chat messages: the template and up to `SHOWN_FAILURES` failing rows."""
    shown = "\n".join(f"- input: {_text(r.get('input'))}; expected: {_text(r.get('expected'))}"
                      for r in failures[:SHOWN_FAILURES]) or "- (none failed)"
    return [{"role": "system", "content": OPTIMISER_SYSTEM.format(count=count)},
            {"role": "user", "content": f"Template:\n{prompt}\n\nExamples the new model "
                                        f"fails with it:\n{shown}"}]


def parse_rewrites(reply: str, prompt: str, count: int) -> tuple[list[Variant], int]:
    """The optimiser's rewrites (at most ``count``) and how many were dropped (module doc)."""
    needed = set(_VARIABLE.findall(prompt))
    parts = [p.strip() for p in reply.split(SEPARATOR)[1:] if p.strip()]
    kept = [p for p in parts if needed <= set(_VARIABLE.findall(p))]
    return ([Variant(f"rewrite {i + 1}", text + "\n") for i, text in enumerate(kept[:count])],
            len(parts) - len(kept[:count]))


def unified(path: str, before: str, after: str) -> str:
    """A ``git apply``-able unified diff of one file (empty when equal)."""
    if before == after:
        return ""
    lines = difflib.unified_diff(split_lines(before, keepends=True),  # git's lines: at \n
                                 split_lines(after, keepends=True), f"a/{path}", f"b/{path}")
    body = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in lines)
    return f"diff --git a/{path} b/{path}\n{body}"


def with_model(config_text: str, line: int, old: str, new: str) -> str:
    """The config text with ``old`` replaced by ``new`` on 1-based ``line`` (the target's
    ``model``).

    Raises:
        ValueError: the line does not hold ``old``.
    """
    lines = split_lines(config_text, keepends=True)  # the YAML marks count at \n only
    if not 1 <= line <= len(lines) or old not in lines[line - 1]:
        raise ValueError(f"line {line} of the config does not name {old}")
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    return "".join(lines)


def folder_name(suite: str) -> str:
    """The suite's name as one safe path segment (letters, digits, ``_-.``; no leading dot),
    so no suite name can reach outside ``.llmgate/migrate/``."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", suite).lstrip(".-")
    return slug or "suite"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
