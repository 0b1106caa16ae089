"""Read a JSONL dataset into `Example` values, naming the file and line of every problem.

One JSON object a line::

    {"id": "t1", "input": "Where is my refund?", "expected": "billing",
     "vars": {"lang": "en"}, "assert": [{"type": "contains", "value": "refund"}],
     "tags": ["must_pass"], "metadata": {"category": "billing"}}

A conversation (a multi-turn example) has ``turns`` instead of ``input`` and ``expected``:
``{"id": "c1", "turns": [{"input": "Hi", "expected": "..."}, {"input": "And then?",
"assert": [...]}]}`` (worker/evals/run/conversation.py says how it is answered and scored).

Only ``input`` (or ``turns``) is required; ``id`` defaults to the 1-based line number (marked
``id_from_line``: enough for ``min``/``max_drop``, but the rules that pair base and head example
by example need explicit ids). Lines are split on ``\\n`` only (JSON strings may hold U+2028),
and blank lines are skipped. A UTF-8 byte-order mark is accepted at the start of the file only
(`worker.evals.config.files.decode_utf8`), and a Git LFS pointer is reported as such.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from worker.errors import ConfigError
from worker.evals.config.files import (
    MAX_DATASET_BYTES,
    MAX_EXAMPLES,
    decode_utf8,
    read_repo_file,
    refuse_stray_bom,
)
from worker.evals.config.safe_yaml import lone_surrogate, surrogate_message
from worker.evals.config.spelling import as_data
from worker.evals.score import KNOWN_ASSERTIONS, parse_relevant, relevant_id_problem, validate_spec
from worker.evals.types import AssertionSpec, Example, Turn

#: Longest line (one example), characters (1 MiB).
MAX_LINE_CHARS = 1 << 20
#: Keys an example may have.
EXAMPLE_KEYS = ("id", "input", "expected", "vars", "assert", "tags", "metadata", "relevant_ids",
                "turns")
#: Keys a turn of a multi-turn example may have.
TURN_KEYS = ("input", "expected", "assert")
#: Most turns in one conversation.
MAX_TURNS = 50


def load_dataset(root: Path, rel_path: str,
                 parse: Callable[[str], tuple[Example, ...]] | None = None) -> tuple[
                     Example, ...]:
    """Read and parse the dataset ``rel_path`` of the checkout at ``root``.

    Args:
        root: the repository checkout.
        rel_path: the dataset path relative to ``root`` (POSIX), as in the config.
        parse: parses the file's text (default: JSONL, `parse_dataset`; other formats:
            worker/evals/config/dataset_formats.py).

    Returns:
        The examples in file order.

    Raises:
        ConfigError: the path is absolute or leads outside ``root`` (symlinks are resolved
            first), the file is missing, not regular, over `MAX_DATASET_BYTES`, not UTF-8 (the
            error names the line and byte), holds no example, or a line is invalid or over
            `MAX_LINE_CHARS`.
    """
    data = read_repo_file(root, rel_path, MAX_DATASET_BYTES)  # no escape, size-capped
    text = decode_utf8(data, rel_path)
    examples = parse(text) if parse is not None else parse_dataset(text, rel_path)
    if not examples:
        raise ConfigError(rel_path, None, "the dataset has no examples: add one (in JSONL, "
                          "one JSON object per line), or remove the suite")
    return examples


def parse_dataset(text: str, path: str) -> tuple[Example, ...]:
    """Parse JSONL text into examples (pure).

    Args:
        text: the file's text.
        path: the file's path relative to the repository root, used in errors.

    Returns:
        The examples in file order, each with its 1-based line.

    Raises:
        ConfigError: malformed JSON, a line that is not an object, a missing ``input``, a bad
            or duplicate ``id``, an unknown key, or an invalid per-example assertion.
    """
    examples: list[Example] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        if len(raw) > MAX_LINE_CHARS:
            raise ConfigError(path, number, f"line {number} has {len(raw)} characters; the "
                              f"limit is {MAX_LINE_CHARS} per example")
        add_example(examples, seen, _parse_line(raw, number, path), path)
    return tuple(examples)


def add_example(examples: list[Example], seen: dict[str, int], example: Example,
                path: str) -> None:
    """Append ``example`` to ``examples`` (file order), refusing a duplicate id (``seen``: id ->
    line of the examples so far, updated) and more than `MAX_EXAMPLES` examples.

    Raises:
        ConfigError: at the example's line.
    """
    if len(examples) >= MAX_EXAMPLES:
        raise ConfigError(path, example.line, f"more than {MAX_EXAMPLES} examples; split the "
                          "dataset into several suites")
    if example.id in seen:
        raise ConfigError(path, example.line, f"duplicate id {example.id!r} "
                          f"(first used at line {seen[example.id]})")
    seen[example.id] = example.line
    examples.append(example)


def _parse_line(raw: str, line: int, path: str) -> Example:
    refuse_stray_bom(raw, path, line)
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(path, line, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise ConfigError(path, line, "invalid JSON: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise ConfigError(path, line, f"invalid JSON: {str(exc)[:200]}") from None
    if not isinstance(doc, dict):
        raise ConfigError(path, line, f"each line must be a JSON object, got {type(doc).__name__}")
    return example_from_doc(doc, line, path)


def _refuse_surrogates(value: Any, line: int, path: str) -> None:
    """Raise `ConfigError` at ``line`` when a string of the record (a key or a value, at any
    depth) holds a lone surrogate (`worker.evals.config.safe_yaml.lone_surrogate`)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found = lone_surrogate(item)
            if found is not None:
                raise ConfigError(path, line, surrogate_message(found))
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def example_from_doc(doc: dict[str, Any], line: int, path: str, *,
                     inline: bool = False) -> Example:
    """Build the `Example` of one decoded record at ``line`` of ``path``.

    Args:
        doc: the record: the keys of `EXAMPLE_KEYS`, and with ``inline`` also assertion types
            as keys (`inline_assertions`: ``contains_any: [a, b]`` next to ``input``).
        line: the record's 1-based line.
        path: the dataset, for errors.
        inline: accept assertion types as keys (JSON and YAML datasets; never JSONL).

    Raises:
        ConfigError: a missing ``input``, a bad ``id``, an unknown key, or an invalid assertion.
    """
    _refuse_surrogates(doc, line, path)
    if inline:
        doc = inline_assertions(doc, line, path)
    unknown = sorted(set(doc) - set(EXAMPLE_KEYS))
    if unknown:
        raise ConfigError(path, line, f"unknown key {unknown[0]!r} "
                          f"(known keys: {', '.join(EXAMPLE_KEYS)})")
    turns = _turns(doc, line, path, inline) if "turns" in doc else ()
    if "input" not in doc and not turns:
        raise ConfigError(path, line, "missing `input` (or `turns` for a conversation)")
    variables = doc.get("vars", {})
    if not isinstance(variables, dict):
        raise ConfigError(path, line, "`vars` must be a JSON object")
    return Example(
        id=_example_id(doc.get("id"), line, path),
        line=line,
        input=[t.input for t in turns] if turns else doc["input"],
        expected=[t.expected for t in turns] if turns else doc.get("expected"),
        vars=variables,
        assertions=_assertions(doc.get("assert", []), line, path),
        tags=_tags(doc.get("tags", []), line, path),
        metadata=_metadata(doc.get("metadata", {}), line, path),
        id_from_line=doc.get("id") is None,
        relevant_ids=_relevant(doc, line, path),
        turns=turns,
    )


def _turns(doc: dict[str, Any], line: int, path: str, inline: bool) -> tuple[Turn, ...]:
    """The turns of a multi-turn example: a non-empty list of ``{input, expected?, assert?}``
    (with ``inline``, assertion types as keys too), and no ``input``/``expected`` beside it."""
    for key in ("input", "expected", "relevant_ids"):
        if key in doc:
            raise ConfigError(path, line, f"an example with `turns` has no top-level `{key}`: "
                              "give each turn its own `input` (and `expected`)")
    value = doc["turns"]
    if not isinstance(value, list) or not value:
        raise ConfigError(path, line, "`turns` must be a non-empty list of turn objects "
                          "({input, expected, assert})")
    if len(value) > MAX_TURNS:
        raise ConfigError(path, line, f"`turns` has {len(value)} turns (at most {MAX_TURNS})")
    return tuple(_turn(item, k, line, path, inline) for k, item in enumerate(value, 1))


def _turn(item: Any, number: int, line: int, path: str, inline: bool) -> Turn:
    where = f"turn {number}"
    if not isinstance(item, dict):
        raise ConfigError(path, line, f"{where} must be an object with an `input`, "
                          f"got {type(item).__name__}")
    if inline:
        item = inline_assertions(item, line, path)
    unknown = sorted(set(item) - set(TURN_KEYS))
    if unknown:
        raise ConfigError(path, line, f"{where}: unknown key {unknown[0]!r} "
                          f"(known keys: {', '.join(TURN_KEYS)})")
    if "input" not in item:
        raise ConfigError(path, line, f"{where}: missing `input`")
    return Turn(item["input"], item.get("expected"), _assertions(item.get("assert", []), line,
                                                                 path))


def _relevant(doc: dict[str, Any], line: int, path: str) -> dict[str, float] | None:
    if "relevant_ids" not in doc:
        return None
    qrels = parse_relevant(doc["relevant_ids"])
    problem = relevant_id_problem(doc["relevant_ids"]) if qrels is not None else None
    if problem is not None:
        raise ConfigError(path, line, problem)
    if qrels is None:
        raise ConfigError(path, line, "`relevant_ids` must be a list of document ids (strings "
                          "or integers) or an object of id -> gain (a number >= 0)")
    return qrels
def inline_assertions(doc: dict[str, Any], line: int, path: str) -> dict[str, Any]:
    """Move the keys of ``doc`` that name an assertion type into its ``assert`` list.

    ``contains_any: [a, b]`` becomes ``{type: contains_any, values: [a, b]}``, a string
    ``value`` (``pattern`` for ``regex``, ``rubric`` for ``llm_judge``), a mapping the
    assertion's options, and ``true`` an assertion without options (``equals: true``).

    Raises:
        ConfigError: an inline assertion's value is none of those, or ``assert`` is not a list.
    """
    inline = [key for key in doc if key in KNOWN_ASSERTIONS and key not in EXAMPLE_KEYS]
    if not inline:
        return doc
    listed = doc.get("assert", [])
    if not isinstance(listed, list):
        raise ConfigError(path, line, "`assert` must be a list of assertion objects")
    specs = [*listed, *(_inline_spec(key, doc[key], line, path) for key in inline)]
    return {**{k: v for k, v in doc.items() if k not in inline}, "assert": specs}


#: The option a plain string of an inline assertion sets (``value`` for the others).
_STRING_OPTION = {"regex": "pattern", "llm_judge": "rubric"}


def _inline_spec(kind: str, value: Any, line: int, path: str) -> dict[str, Any]:
    if isinstance(value, dict):
        return {**value, "type": kind}
    if isinstance(value, list):
        return {"type": kind, "values": value}
    if isinstance(value, str):
        return {"type": kind, _STRING_OPTION.get(kind, "value"): value}
    if value is True:
        return {"type": kind}
    raise ConfigError(path, line, f"inline assertion `{kind}` must be a string, a list of "
                      f"strings, its options or true, got {as_data(value)}")


def _tags(value: Any, line: int, path: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
        raise ConfigError(path, line, "`tags` must be a list of non-empty strings")
    return tuple(value)


def _metadata(value: Any, line: int, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(path, line, "`metadata` must be a JSON object")
    return value


def _example_id(value: Any, line: int, path: str) -> str:
    if value is None:
        return str(line)
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise ConfigError(path, line, f"`id` must be a non-empty string or an integer, "
                          f"got {as_data(value)}")
    return str(value)


def _assertions(value: Any, line: int, path: str) -> tuple[AssertionSpec, ...]:
    if not isinstance(value, list):
        raise ConfigError(path, line, "`assert` must be a list of assertion objects")
    specs = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise ConfigError(path, line, "each `assert` entry must be an object with a `type`")
        params = {k: v for k, v in item.items() if k != "type"}
        spec = AssertionSpec(item["type"], params, line)
        validate_spec(spec, path)
        specs.append(spec)
    return tuple(specs)
