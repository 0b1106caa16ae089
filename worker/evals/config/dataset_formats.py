"""Datasets people already have: JSON, YAML and CSV beside JSONL, chosen by the file's suffix.

- ``.jsonl`` (and any other suffix): one JSON object a line (worker/evals/config/dataset.py).
- ``.json``: a list of example objects, or ``{"examples": [...]}``.
- ``.yaml``/``.yml``: the same as YAML (read through worker/evals/config/safe_yaml.py: bounded,
  at most 1 MiB).
- ``.csv``: a header row, then one example a row (RFC 4180 quoting, so a cell may span
  lines; a row ends at ``\\n`` or ``\\r\\n`` only, so an unquoted U+2028 stays in its cell, as
  Python's ``csv.writer`` writes it). The suite's ``columns:`` maps ``id``, ``input``,
  ``expected`` and ``tags`` (split on ``,``) to column names; a column of that name is used
  when unmapped, and every other column becomes one of the example's ``vars``.

In JSON and YAML an example may carry its own assertions inline, next to its input
(``contains_any: [refund, billing]``, ``not_contains: sorry``, ``llm_judge: "is polite"``;
`worker.evals.config.dataset.inline_assertions`). Every error names the file and the line of
the example (or of the JSON or YAML syntax error).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from worker.errors import ConfigError
from worker.evals.config import safe_yaml
from worker.evals.config.dataset import (
    add_example,
    example_from_doc,
    load_dataset,
    parse_dataset,
)
from worker.evals.config.files import split_lines
from worker.evals.config.reader import Reader
from worker.evals.types import Example

#: Example keys a CSV column may be mapped to by a suite's ``columns:``.
CSV_KEYS = ("id", "input", "expected", "tags")
#: Suffixes read as something other than JSONL.
SUFFIXES = (".json", ".yaml", ".yml", ".csv")


def csv_columns(reader: Reader,
                entries: dict[str, tuple[Node, Node]]) -> tuple[tuple[str, str], ...]:
    """Parse a suite's ``columns:`` (example key -> CSV column name), () when absent.

    Raises:
        ConfigError: not a mapping, a key other than `CSV_KEYS`, a value not a non-empty
            string, or ``columns:`` on a dataset that is not ``.csv``.
    """
    if "columns" not in entries:
        return ()
    key_node, node = entries["columns"]
    dataset = reader.value(entries["dataset"][1]) if "dataset" in entries else ""
    if not str(dataset).lower().endswith(".csv"):
        raise reader.error(key_node, "`columns` maps the columns of a .csv dataset; this "
                           "suite's dataset is not one")
    pairs = reader.mapping(node, "`columns`", CSV_KEYS)
    return tuple((key, reader.string(value, f"`columns.{key}`"))
                 for key, (_, value) in pairs.items())


def load_any(root: Path, rel_path: str,
             columns: Mapping[str, str] | None = None) -> tuple[Example, ...]:
    """Read and parse the dataset ``rel_path`` at ``root`` in its format (`parse_any`).

    Raises:
        ConfigError: as `worker.evals.config.dataset.load_dataset`, and as `parse_any`.
    """
    return load_dataset(root, rel_path, lambda text: parse_any(text, rel_path, columns))


def parse_any(text: str, path: str, columns: Mapping[str, str] | None = None) -> tuple[
        Example, ...]:
    """Parse a dataset's text by its suffix (module docstring; pure).

    Args:
        text: the file's text.
        path: the file's path relative to the repository root (its suffix picks the format).
        columns: a CSV suite's ``columns:`` (example key -> column name); ignored otherwise.

    Raises:
        ConfigError: a syntax error or an invalid example, at its line.
    """
    suffix = path.lower().rsplit(".", 1)[-1] if "." in path else ""
    if suffix == "json":
        records = _json_records(text, path)
    elif suffix in ("yaml", "yml"):
        records = _yaml_records(text, path)
    elif suffix == "csv":
        records = _csv_records(text, path, columns or {})
    else:
        return parse_dataset(text, path)
    examples: list[Example] = []
    seen: dict[str, int] = {}
    for line, doc in records:
        if not isinstance(doc, dict):
            raise ConfigError(path, line, f"each example must be an object, got "
                              f"{type(doc).__name__}")
        add_example(examples, seen, example_from_doc(doc, line, path, inline=suffix != "csv"),
                    path)
    return tuple(examples)


def _line_at(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _json_records(text: str, path: str) -> Iterator[tuple[int, Any]]:
    """Yield ``(line, record)`` of a JSON list or ``{"examples": [...]}``."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(path, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") \
            from None
    except (RecursionError, ValueError) as exc:
        raise ConfigError(path, None, f"invalid JSON: {str(exc)[:200]}") from None
    if isinstance(doc, dict) and isinstance(doc.get("examples"), list):
        start = _examples_value(text)
    elif isinstance(doc, list):
        start = len(text) - len(text.lstrip())
    else:
        raise ConfigError(path, 1, "a JSON dataset is a list of examples or an object with "
                          "an `examples` list")
    return _array_items(text, start)


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in " \t\r\n":
        index += 1
    return index


def _examples_value(text: str) -> int:
    """Return the index of the ``[`` of the top-level object's ``examples`` (valid JSON)."""
    decoder = json.JSONDecoder()
    index = _skip(text, _skip(text, 0) + 1)  # past "{"
    while True:
        key, index = decoder.raw_decode(text, index)
        index = _skip(text, _skip(text, index) + 1)  # past ":"
        if key == "examples":
            return index
        _, index = decoder.raw_decode(text, index)
        index = _skip(text, _skip(text, index) + 1)  # past ","


def _array_items(text: str, start: int) -> Iterator[tuple[int, Any]]:
    """Yield ``(line, value)`` of each element of the JSON array whose ``[`` is at ``start``."""
    decoder = json.JSONDecoder()
    index = _skip(text, start + 1)
    while text[index] != "]":
        value, end = decoder.raw_decode(text, index)
        yield _line_at(text, index), value
        index = _skip(text, end)
        index = _skip(text, index + 1) if text[index] == "," else index


def _yaml_records(text: str, path: str) -> Iterator[tuple[int, Any]]:
    """Yield ``(line, record)`` of a YAML list or ``examples:`` mapping."""
    try:
        root = safe_yaml.compose(text, path)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise ConfigError(path, mark.line + 1 if mark is not None else None,
                          f"YAML syntax error: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(path, None, f"YAML error: {exc}") from None
    items = _yaml_list(root)
    if items is None:
        raise ConfigError(path, 1, "a YAML dataset is a list of examples or a mapping with an "
                          "`examples:` list")
    for item in items:
        yield int(item.start_mark.line) + 1, _construct(item, path)


def _yaml_list(root: Node | None) -> list[Node] | None:
    if isinstance(root, SequenceNode):
        return list(root.value)
    if isinstance(root, MappingNode):
        for key, value in root.value:
            if isinstance(key, ScalarNode) and key.value == "examples" \
                    and isinstance(value, SequenceNode):
                return list(value.value)
    return None


def _construct(node: Node, path: str) -> Any:
    """Build the Python value of one (bounded) YAML node with the safe constructor."""
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(path, int(node.start_mark.line) + 1, f"YAML error: {exc}") from None
    finally:
        loader.dispose()


def _csv_records(text: str, path: str, columns: Mapping[str, str]) -> Iterator[
        tuple[int, dict[str, Any]]]:
    """Yield ``(line, record)`` of each CSV row, its cells mapped by ``columns``."""
    reader = csv.reader(split_lines(text, keepends=True), strict=True)  # rows end at \n only
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise ConfigError(path, 1, f"invalid CSV header: {exc}") from None
    if not header:
        raise ConfigError(path, 1, "a CSV dataset needs a header row naming its columns")
    mapping = {key: columns.get(key, key) for key in CSV_KEYS}
    missing = [f"{key} (column {name!r})" for key, name in mapping.items()
               if key in columns and name not in header]
    if mapping["input"] not in header and "input" not in columns:
        missing.append("input")
    if missing:
        raise ConfigError(path, 1, f"the header has no column for {', '.join(missing)} "
                          f"(columns: {', '.join(header)}); map them with the suite's "
                          "`columns:`")
    start = reader.line_num + 1
    while True:
        try:
            row = next(reader, None)
        except csv.Error as exc:
            raise ConfigError(path, start, f"invalid CSV: {exc}") from None
        if row is None:
            return
        if any(cell.strip() for cell in row):
            yield start, _csv_record(header, row, mapping, path, start)
        start = reader.line_num + 1


def _csv_record(header: list[str], row: list[str], mapping: Mapping[str, str], path: str,
                line: int) -> dict[str, Any]:
    if len(row) != len(header):
        raise ConfigError(path, line, f"{len(row)} cells, but the header has {len(header)}")
    cells = dict(zip(header, row, strict=True))
    used = {name for name in mapping.values()}
    record: dict[str, Any] = {"input": cells[mapping["input"]]}
    for key in ("id", "expected"):
        if cells.get(mapping[key]):
            record[key] = cells[mapping[key]]
    if cells.get(mapping["tags"]):
        record["tags"] = [t.strip() for t in cells[mapping["tags"]].split(",") if t.strip()]
    variables = {name: value for name, value in cells.items() if name not in used}
    if variables:
        record["vars"] = variables
    return record
