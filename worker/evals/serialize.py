"""Turn eval results into JSON values and back (pure), for the baseline store.

`to_jsonable` maps a frozen dataclass of worker/evals/types.py (and anything inside it) to
plain JSON values: dataclasses become objects keyed by field name, tuples become lists.
`from_jsonable` rebuilds the dataclass from those values, guided by the type hints of its
fields, and checks every value against them, so a stored record that does not fit the current
types is refused with `SerializeError` instead of becoming a half-valid result.

Values typed ``Any`` (outputs, expected values, inputs, metadata, assertion details) are JSON
values already, as the engine reads them from JSON (datasets, target output files, model
replies); tuples inside them come back as lists. Floats keep ``inf`` and ``nan`` (Python's json
writes them as ``Infinity``/``NaN`` and reads them back).

Text a target or a model produces need not be valid Unicode: a JSON escape such as
``"\\ud800"`` gives a string holding a lone surrogate, which no UTF-8 encoder writes, and an
output file may hold bytes that are not UTF-8. `decode_output` and `valid_value` replace each
invalid sequence with U+FFFD where outputs enter (worker/evals/score/outputs.py,
worker/evals/llm/client.py) and count them for a note on the example (`replaced_note`);
`valid_text` is the last guard where text is written (reports, the baseline store, the
response cache).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import types
import typing
from typing import Any, TypeVar, Union

from worker.evals.types import SuiteResult

T = TypeVar("T")


#: What each invalid sequence of an output becomes (U+FFFD REPLACEMENT CHARACTER).
REPLACEMENT = "\ufffd"
#: A surrogate code point: in a Python string always a lone one (a pair is one code point).
_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """Return ``text`` with every lone surrogate (U+D800-U+DFFF) replaced by U+FFFD, so it
    encodes as UTF-8 (`count_invalid` counts them)."""
    return _SURROGATE.sub(REPLACEMENT, text)


def count_invalid(text: str) -> int:
    """Return how many lone surrogates ``text`` holds (what `valid_text` replaces)."""
    return len(_SURROGATE.findall(text))


def valid_value(value: Any) -> tuple[Any, int]:
    """Return the JSON value ``value`` with `valid_text` applied to every string in it (object
    keys too) and the number of lone surrogates replaced; other values are kept as they are."""
    if isinstance(value, str):
        return valid_text(value), count_invalid(value)
    if isinstance(value, list | tuple):
        pairs = [valid_value(item) for item in value]
        return type(value)(item for item, _ in pairs), sum(n for _, n in pairs)
    if isinstance(value, dict):
        found = 0
        cleaned = {}
        for key, item in value.items():
            clean_key, key_found = valid_value(key)
            cleaned[clean_key], item_found = valid_value(item)
            found += key_found + item_found
        return cleaned, found
    return value, 0


def decode_output(data: bytes) -> tuple[str, int]:
    """Decode the UTF-8 ``data`` a target wrote, replacing each invalid sequence (each maximal
    ill-formed subpart, Unicode 15 section 3.9) with U+FFFD; return the text and how many
    sequences were replaced. Never raises."""
    text = data.decode("utf-8", "replace")
    return text, text.count(REPLACEMENT) - data.count(REPLACEMENT.encode("utf-8"))


def replaced_note(count: int) -> str:
    """The note on an example whose output had ``count`` (>= 1) invalid sequences replaced."""
    sequences = "sequence" if count == 1 else "sequences"
    return (f"the output was not valid Unicode: {count} invalid {sequences} (invalid UTF-8 "
            "or a lone surrogate such as \\ud800) replaced by U+FFFD")


class SerializeError(ValueError):
    """A JSON value does not fit the type it should be rebuilt as (names the field path)."""


def json_object(raw: str | bytes | None) -> dict[str, Any] | None:
    """Parse a stored JSON object (text or bytes, as Redis or SQLite return it); None when it is
    absent, unreadable or not an object. Never raises."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def to_jsonable(value: Any) -> Any:
    """Return ``value`` as plain JSON values (dicts with str keys, lists, str, numbers, None).

    Raises:
        SerializeError: a dict key is not a string.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [to_jsonable(item) for item in value]
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise SerializeError("dict keys must be strings to be stored as JSON")
        return {key: to_jsonable(item) for key, item in value.items()}
    return value


def from_jsonable(cls: type[T], data: Any, path: str = "$") -> T:
    """Rebuild an instance of the dataclass ``cls`` from `to_jsonable`'s output.

    Missing fields take their defaults; unknown fields are refused.

    Raises:
        SerializeError: a value has the wrong type, a required field is missing or an unknown
            one is present (the message names the path, e.g. ``$.examples[3].passed``).
    """
    value: T = _decode(cls, data, path)
    return value


def suite_result_to_json(result: SuiteResult) -> dict[str, Any]:
    """Return one suite's result (per-example outputs, scores, assertions) as a JSON object."""
    data: dict[str, Any] = to_jsonable(result)
    return data


def suite_result_from_json(data: Any) -> SuiteResult:
    """Rebuild a `SuiteResult` from `suite_result_to_json`'s output.

    Raises:
        SerializeError: the data does not fit `SuiteResult` (see `from_jsonable`).
    """
    return from_jsonable(SuiteResult, data)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _decode(hint: Any, data: Any, path: str) -> Any:
    origin = typing.get_origin(hint)
    if hint is Any:
        return data
    if origin in (Union, types.UnionType):
        return _decode_union(typing.get_args(hint), data, path)
    if origin is typing.Literal:
        if data not in typing.get_args(hint):
            raise SerializeError(f"{path}: {data!r} is not one of {typing.get_args(hint)}")
        return data
    if origin is tuple:
        return _decode_tuple(typing.get_args(hint), data, path)
    if origin is dict:
        return _decode_dict(typing.get_args(hint)[1], data, path)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _decode_dataclass(hint, data, path)
    return _decode_scalar(hint, data, path)


def _decode_union(options: tuple[Any, ...], data: Any, path: str) -> Any:
    if data is None and type(None) in options:
        return None
    errors = []
    for option in options:
        if option is type(None):
            continue
        try:
            return _decode(option, data, path)
        except SerializeError as err:
            errors.append(str(err))
    raise SerializeError("; ".join(errors) or f"{path}: unexpected null")


def _decode_tuple(args: tuple[Any, ...], data: Any, path: str) -> tuple[Any, ...]:
    if not isinstance(data, list):
        raise SerializeError(f"{path}: expected a list, got {type(data).__name__}")
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_decode(args[0], item, f"{path}[{i}]") for i, item in enumerate(data))
    if len(args) != len(data):
        raise SerializeError(f"{path}: expected {len(args)} items, got {len(data)}")
    pairs = enumerate(zip(args, data, strict=True))
    return tuple(_decode(a, item, f"{path}[{i}]") for i, (a, item) in pairs)


def _decode_dict(value_hint: Any, data: Any, path: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise SerializeError(f"{path}: expected an object, got {type(data).__name__}")
    return {key: _decode(value_hint, item, f"{path}.{key}") for key, item in data.items()}


def _decode_dataclass(cls: type, data: Any, path: str) -> Any:
    if not isinstance(data, dict):
        raise SerializeError(f"{path}: expected an object, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise SerializeError(f"{path}: unknown field(s) {', '.join(unknown)}")
    hints = _hints(cls)
    values = {}
    for name, spec in fields.items():
        if name in data:
            values[name] = _decode(hints[name], data[name], f"{path}.{name}")
        elif spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
            raise SerializeError(f"{path}: missing field {name}")
    return cls(**values)


def _decode_scalar(hint: Any, data: Any, path: str) -> Any:
    if hint is float and isinstance(data, int | float) and not isinstance(data, bool):
        return float(data)
    if hint in (str, int, bool) and type(data) is hint:
        return data
    if hint is type(None) and data is None:
        return None
    raise SerializeError(f"{path}: expected {getattr(hint, '__name__', hint)}, "
                         f"got {type(data).__name__}")
