"""Deterministic assertions on structure, form, labels, latency and cost (pure).

``json_valid``: the output is JSON (a JSON value already, or text that parses as JSON).
``json_schema``: the output is JSON valid under ``schema`` (inline) or the schema in ``file``
(JSON or YAML, relative to the repository root), checked with the jsonschema library (the
draft the schema's ``$schema`` names, else 2020-12; remote ``$ref``s are never fetched).
``starts_with``: the text starts with ``value`` (leading whitespace ignored).
``length``: the text has at least ``min`` and at most ``max`` characters.
``is_one_of``: the text (trimmed) is one of ``values``.
``classification``: the predicted label (the text, or the ``field`` of a JSON output, a dotted
path) equals ``expected``; it may be limited to ``labels``. Its label feeds accuracy and F1.
``latency``: the target took at most ``max_ms`` milliseconds.
``cost``: the example cost at most ``max_usd`` USD.
``mc_answer``: the answer names the right option (consistency suites,
worker/evals/score/mc_answer.py).
Text options ``case_sensitive`` default to false, as for ``contains``; ``normalize`` (default
true) compares ``starts_with``, ``is_one_of`` and ``classification`` text with line endings made
``\\n`` and in Unicode NFC (`normalize_text`), as the basic text assertions do.
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Callable
from typing import Any

import jsonschema

from worker.errors import ConfigError
from worker.evals.score import mc_answer
from worker.evals.types import AssertionSpec, Example, TargetOutput

#: The assertion types of this module.
STRUCTURED_TYPES = ("json_valid", "json_schema", "starts_with", "length", "is_one_of",
                    "classification", "latency", "cost", "mc_answer")
PARAMS: dict[str, tuple[str, ...]] = {
    "json_valid": (), "json_schema": ("schema", "file"),
    "starts_with": ("value", "case_sensitive", "normalize"), "length": ("min", "max"),
    "is_one_of": ("values", "case_sensitive", "normalize"),
    "classification": ("field", "labels", "case_sensitive", "normalize"),
    "latency": ("max_ms",), "cost": ("max_usd",),
    "mc_answer": (),
}
Fail = Callable[[str], ConfigError]
Outcome = tuple[bool, str, dict[str, Any]]


def validate(spec: AssertionSpec, fail: Fail) -> None:
    """Check the options of a structured assertion at config time.

    Raises:
        ConfigError: ``fail(message)`` for an unknown, missing or malformed option, or an
            inline schema that is not a valid JSON Schema.
    """
    known = PARAMS[spec.type]
    for key in spec.params:
        if key not in known:
            raise fail(f"unknown option {key!r} (known options: {', '.join(known) or 'none'})")
    p = spec.params
    for key in ("case_sensitive", "normalize"):
        if key in p and not isinstance(p[key], bool):
            raise fail(f"`{key}` must be true or false")
    if spec.type in _VALIDATORS:
        _VALIDATORS[spec.type](p, fail)


def _v_schema(p: dict[str, Any], fail: Fail) -> None:
    if ("schema" in p) == ("file" in p):
        raise fail("needs exactly one of `schema` (inline) or `file` (a schema file path)")
    if "file" in p and (not isinstance(p["file"], str) or not p["file"].strip()):
        raise fail("`file` must be a path relative to the repository root")
    if "schema" in p:
        check_schema(p["schema"], fail)


def check_schema(schema: Any, fail: Fail) -> None:
    """Raise ``fail(...)`` unless ``schema`` is a valid JSON Schema (a mapping or a boolean)."""
    if not isinstance(schema, dict | bool):
        raise fail("`schema` must be a JSON Schema object")
    validator: Any = jsonschema.validators.validator_for(schema)
    try:
        validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise fail(f"invalid JSON Schema: {exc.message}") from None


def _v_text(p: dict[str, Any], fail: Fail) -> None:
    if not isinstance(p.get("value"), str) or not p["value"]:
        raise fail("needs `value`, a non-empty string")


def _v_length(p: dict[str, Any], fail: Fail) -> None:
    if "min" not in p and "max" not in p:
        raise fail("needs `min` and/or `max` (characters)")
    for key in ("min", "max"):
        if key in p and (isinstance(p[key], bool) or not isinstance(p[key], int) or p[key] < 0):
            raise fail(f"`{key}` must be a non-negative integer (characters)")
    if "min" in p and "max" in p and p["min"] > p["max"]:
        raise fail("`min` is larger than `max`")


def _v_values(p: dict[str, Any], fail: Fail, key: str = "values", required: bool = True) -> None:
    if key not in p and not required:
        return
    values = p.get(key)
    if not isinstance(values, list) or not values or not all(
            isinstance(v, str) and v for v in values):
        raise fail(f"`{key}` must be a non-empty list of strings (quote numbers)")


def _v_classification(p: dict[str, Any], fail: Fail) -> None:
    _v_values(p, fail, "labels", required=False)
    if "field" in p and (not isinstance(p["field"], str) or not p["field"]):
        raise fail("`field` must be a key (or dotted path) of the JSON output")


def _v_number(key: str, unit: str) -> Callable[[dict[str, Any], Fail], None]:
    def check(p: dict[str, Any], fail: Fail) -> None:
        value = p.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or value < 0:
            raise fail(f"needs `{key}`, a non-negative number of {unit}")
    return check


_VALIDATORS: dict[str, Callable[[dict[str, Any], Fail], None]] = {
    "json_schema": _v_schema, "starts_with": _v_text, "length": _v_length,
    "is_one_of": _v_values, "classification": _v_classification,
    "latency": _v_number("max_ms", "milliseconds"), "cost": _v_number("max_usd", "USD"),
}


def check(spec: AssertionSpec, output: Any, example: Example,
          target: TargetOutput | None = None) -> Outcome:
    """Check one structured assertion: ``(passed, message, details)``.

    Args:
        spec: a validated spec (``json_schema`` with its schema inline, see
            worker/evals/config/schemas.py `load_schema_file`).
        output: the target's output.
        example: the example (``expected`` for ``classification``).
        target: the full target output (``latency``, ``cost``), or None.
    """
    return _CHECKS[spec.type](spec.params, output, example, target)


def _text(output: Any) -> str:
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def _json(output: Any) -> tuple[bool, Any]:
    if not isinstance(output, str):
        return True, output
    try:
        return True, json.loads(output)
    except (ValueError, RecursionError):
        return False, None


def normalize_text(text: str) -> str:
    """Return ``text`` as a reader sees it: ``\\r\\n`` and a lone ``\\r`` made ``\\n``, then
    Unicode Normalization Form C (UAX #15), so canonically equivalent text is equal."""
    return unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))


def _fold(text: str, p: dict[str, Any]) -> str:
    if p.get("normalize", True):
        text = normalize_text(text)
    return text if p.get("case_sensitive", False) else text.casefold()


def _c_json_valid(p: dict[str, Any], output: Any, ex: Example, t: TargetOutput | None) -> Outcome:
    ok, _ = _json(output)
    return ok, f"expected JSON, got {_clip(_text(output))}", {}


def _c_json_schema(p: dict[str, Any], output: Any, ex: Example,
                   t: TargetOutput | None) -> Outcome:
    ok, value = _json(output)
    if not ok:
        return False, f"expected JSON matching the schema, got {_clip(_text(output))}", {}
    validator = jsonschema.validators.validator_for(p["schema"])(p["schema"])
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return True, "", {}
    where = "/".join(str(part) for part in error.absolute_path) or "(root)"
    return False, f"schema violation at {where}: {_clip(error.message)}", {}


def _c_starts_with(p: dict[str, Any], output: Any, ex: Example,
                   t: TargetOutput | None) -> Outcome:
    ok = _fold(_text(output).lstrip(), p).startswith(_fold(p["value"], p))
    return ok, f"expected the output to start with {p['value']!r}, got {_clip(_text(output))}", {}


def _c_length(p: dict[str, Any], output: Any, ex: Example, t: TargetOutput | None) -> Outcome:
    n = len(_text(output))
    ok = p.get("min", 0) <= n <= p.get("max", n)
    bounds = f"{p.get('min', 0)}..{p.get('max', 'any')}"
    return ok, f"expected {bounds} characters, got {n}", {"length": n}


def _c_is_one_of(p: dict[str, Any], output: Any, ex: Example,
                 t: TargetOutput | None) -> Outcome:
    got = _fold(_text(output).strip(), p)
    ok = any(got == _fold(v, p) for v in p["values"])
    return ok, f"expected one of {p['values']}, got {_clip(_text(output))}", {}


def predicted_label(p: dict[str, Any], output: Any) -> str | None:
    """Return the label a ``classification`` assertion reads from ``output``, or None."""
    value = output
    if "field" in p:
        ok, value = _json(output)
        for key in str(p["field"]).split("."):
            value = value.get(key) if ok and isinstance(value, dict) else None
        if value is None:
            return None
    return _text(value).strip() if value is not None else None


def _c_classification(p: dict[str, Any], output: Any, ex: Example,
                      t: TargetOutput | None) -> Outcome:
    label = predicted_label(p, output)
    if ex.expected is None:
        return False, "example has no `expected` label", {"label": label}
    want = _fold(_text(ex.expected).strip(), p)
    if label is None:
        return False, f"no label at `{p.get('field')}` of the output", {"label": None}
    labels = p.get("labels")
    if labels is not None and _fold(label, p) not in {_fold(v, p) for v in labels}:
        return False, f"label {label!r} is not one of {labels}", {"label": label}
    return _fold(label, p) == want, f"expected label {ex.expected!r}, got {label!r}", {
        "label": label}


def _c_latency(p: dict[str, Any], output: Any, ex: Example, t: TargetOutput | None) -> Outcome:
    if t is None:
        return False, "no latency was measured", {}
    return (t.latency_ms <= p["max_ms"], f"took {t.latency_ms:.0f} ms, more than "
            f"{p['max_ms']:g} ms", {"latency_ms": t.latency_ms})


def _c_cost(p: dict[str, Any], output: Any, ex: Example, t: TargetOutput | None) -> Outcome:
    if t is None or t.cost_usd is None:
        return False, "the cost is unknown (no price for the model, or not reported)", {}
    return (t.cost_usd <= p["max_usd"] + 1e-12, f"cost ${t.cost_usd:.6f}, more than "
            f"${p['max_usd']:g}", {"cost_usd": t.cost_usd})


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


_CHECKS: dict[str, Callable[[dict[str, Any], Any, Example, TargetOutput | None], Outcome]] = {
    "json_valid": _c_json_valid, "json_schema": _c_json_schema,
    "starts_with": _c_starts_with, "length": _c_length, "is_one_of": _c_is_one_of,
    "classification": _c_classification, "latency": _c_latency, "cost": _c_cost,
    "mc_answer": mc_answer.check,
}
