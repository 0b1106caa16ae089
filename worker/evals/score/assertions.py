"""Deterministic assertions on a target's output: validation at config time, checks at run time.

Every assertion is pure and gives a pass/fail `AssertionResult` (score 1.0 or 0.0) with a
message saying what was expected and what was found. Text assertions see a non-string output
as its JSON text (``json.dumps``); values in messages are clipped to `CLIP_CHARS` characters.
``not_contains`` reads the output folded to what a reader sees, so zero-width characters or
look-alike letters inside a forbidden value do not hide it (`_text_check` says why only it).

Every text assertion (`NORMALIZED_TYPES`: the basic ones here, and ``starts_with``,
``is_one_of`` and ``classification``, worker/evals/score/structured.py) compares text as a
reader sees it by default (`normalize_text`): line endings made ``\\n`` and Unicode NFC, on
the output and on the reference alike (``expected``, ``value``/``values``, a regex
``pattern``), so the same answer written with Windows line endings or in decomposed form (NFD)
is equal to it (field case: CRLF and NFD outputs failed ``equals``, ``contains`` and
``regex``). ``normalize: false`` compares the raw text. The semantics are versioned
`TEXT_VERSION` (part of a suite's fingerprint, worker/evals/run/fingerprint.py, so results
scored before are scored again).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from worker.errors import ConfigError
from worker.evals.score import structured
from worker.evals.score.kinds import EXTRA_TYPES, validate_extra
from worker.evals.score.structured import normalize_text
from worker.evals.types import AssertionResult, AssertionSpec, Example
from worker.security import fold

#: The basic assertion types of this module.
BASIC_ASSERTIONS = ("equals", "contains", "contains_any", "contains_all", "not_contains", "regex")
#: Assertion types, as written in ``type:`` of the config or of a dataset's ``assert`` list
#: (the added ones are described in worker/evals/score/kinds.py).
KNOWN_ASSERTIONS = BASIC_ASSERTIONS + EXTRA_TYPES
#: Longest value (characters of its JSON text) quoted in a failure message.
CLIP_CHARS = 200
#: Version of the text assertions' semantics: 2 compares normalised text (module doc).
TEXT_VERSION = "text/2"
#: The assertion types that compare normalised text by default (``normalize: false`` opts out).
NORMALIZED_TYPES = (*BASIC_ASSERTIONS, "starts_with", "is_one_of", "classification")

_TEXT_TYPES = ("contains", "contains_any", "contains_all", "not_contains")
_TEXT_PARAMS = ("value", "values", "case_sensitive", "normalize")
_PARAMS: dict[str, tuple[str, ...]] = {
    "equals": ("ignore_case", "normalize"),
    "regex": ("pattern", "ignore_case", "normalize"),
    **{name: _TEXT_PARAMS for name in _TEXT_TYPES},
}
_BOOL_PARAMS = ("ignore_case", "case_sensitive", "normalize")


def validate_spec(spec: AssertionSpec, path: str) -> None:
    """Check that an assertion is well formed, before anything runs.

    Args:
        spec: the assertion as configured; ``spec.line`` is used in the error.
        path: the file the assertion comes from (config or dataset), for the error.

    Raises:
        ConfigError: unknown type, unknown or missing option, an option of the wrong type, or
            an invalid regex pattern.
    """

    def fail(message: str) -> ConfigError:
        return ConfigError(path, spec.line, f"assertion `{spec.type}`: {message}")

    if spec.type not in KNOWN_ASSERTIONS:
        raise ConfigError(path, spec.line, f"unknown assertion type {spec.type!r} "
                          f"(known types: {', '.join(KNOWN_ASSERTIONS)})")
    if spec.type in EXTRA_TYPES:
        validate_extra(spec, path)
        return
    known = _PARAMS[spec.type]
    for key, value in spec.params.items():
        if key not in known:
            raise fail(f"unknown option {key!r} (known options: {', '.join(known)})")
        if key in _BOOL_PARAMS and not isinstance(value, bool):
            raise fail(f"`{key}` must be true or false")
    if spec.type in _TEXT_TYPES:
        _validate_needles(spec.params, fail)
    elif spec.type == "regex":
        _validate_regex(spec.params, fail)


def _validate_regex(params: dict[str, Any], fail: Callable[[str], ConfigError]) -> None:
    pattern = params.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise fail("needs `pattern`, a non-empty string (a Python regular expression)")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise fail(f"invalid regex pattern {pattern!r}: {exc}") from None


def _validate_needles(params: dict[str, Any], fail: Callable[[str], ConfigError]) -> None:
    if ("value" in params) == ("values" in params):
        raise fail("needs exactly one of `value` (a string) or `values` (a list of strings)")
    needles = [params["value"]] if "value" in params else params["values"]
    if not isinstance(needles, list) or not needles:
        raise fail("`values` must be a non-empty list of strings")
    for needle in needles:
        if not isinstance(needle, str) or not needle:
            raise fail(f"each value must be a non-empty string, got {needle!r} (quote numbers)")


def check(spec: AssertionSpec, output: Any, example: Example) -> AssertionResult:
    """Check one (validated) assertion against one output.

    Args:
        spec: an assertion that passed `validate_spec`.
        output: the target's output (any JSON value).
        example: the example, for ``expected``.

    Returns:
        The result; score 1.0 when passed, else 0.0 with a message. Structured types are
        checked without target metadata here (the engine passes it for ``latency``/``cost``);
        model, batch and run-level types are not checked here (see worker/evals/score/scoring.py).
    """
    if spec.type in structured.STRUCTURED_TYPES:
        passed, message, details = structured.check(spec, output, example)
        return AssertionResult(spec.type, passed, 1.0 if passed else 0.0,
                               "" if passed else message, details=details)
    passed, message = _CHECKS[spec.type](spec, output, example)
    return AssertionResult(spec.type, passed, 1.0 if passed else 0.0, "" if passed else message)


def show(value: Any) -> str:
    """Return ``value`` as JSON text clipped to `CLIP_CHARS` characters, for messages."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= CLIP_CHARS else f"{text[:CLIP_CHARS]}... ({len(text)} chars)"


def as_text(output: Any) -> str:
    """Return the text a text assertion sees: a string as is, anything else as JSON text."""
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def _normalizer(spec: AssertionSpec) -> Callable[[str], str]:
    """`normalize_text`, or the text unchanged with ``normalize: false``."""
    return normalize_text if spec.params.get("normalize", True) else _same


def _same(text: str) -> str:
    return text


def _canonical(value: Any) -> str:
    """Return JSON text that is equal for equal JSON values (1 == 1.0, key order ignored)."""

    def norm(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, list):
            return [norm(item) for item in v]
        if isinstance(v, dict):
            return {str(k): norm(item) for k, item in v.items()}
        return v

    return json.dumps(norm(value), sort_keys=True, ensure_ascii=False)


def _json_or_text(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value.strip()


def _norm_str(value: Any, norm: Callable[[str], str]) -> Any:
    return norm(value) if isinstance(value, str) else value


def _equals(spec: AssertionSpec, output: Any, example: Example) -> tuple[bool, str]:
    expected = example.expected
    if expected is None:
        return False, "example has no `expected` value; `equals` compares the output with it"
    norm = _normalizer(spec)
    if isinstance(output, str) and isinstance(expected, str):
        got, want = norm(output).strip(), norm(expected).strip()
        if spec.params.get("ignore_case", False):
            got, want = got.casefold(), want.casefold()
        passed = got == want
    else:
        passed = _canonical(_json_or_text(_norm_str(output, norm))) == _canonical(
            _json_or_text(_norm_str(expected, norm)))
    return passed, f"expected {show(expected)}, got {show(output)}"


def _text_check(spec: AssertionSpec, output: Any, example: Example) -> tuple[bool, str]:
    """Check ``contains``, ``contains_any``, ``contains_all`` or ``not_contains``.

    ``not_contains`` matches the output and its values folded the same way to what a reader
    sees (worker/security/text_fold.py: invisible characters removed, NFKC, combining marks
    left after it removed, Unicode spaces and dashes made ASCII, Cyrillic/Greek look-alikes made
    Latin), so a forbidden phrase written with a zero-width space, a combining low line on each
    letter or a Cyrillic letter is still found. Folding can only make more outputs contain a
    value, which fails more of them: the closed direction for a forbidden value (removing
    characters from both sides keeps every match). The positive checks match the raw text:
    folding would let an output contain what it does not show (NFKC reads ``2¹⁰``, i.e. 1024,
    as ``210``; ``①`` as ``1``), so a wrong answer could pass them.
    """
    params = spec.params
    norm = _normalizer(spec)
    needles = [norm(n) for n in ([params["value"]] if "value" in params else params["values"])]
    text = norm(as_text(output))
    if spec.type == "not_contains":
        text, needles = fold(text), [fold(needle) for needle in needles]
    if not params.get("case_sensitive", False):
        text = text.casefold()
        needles = [needle.casefold() for needle in needles]
    found = [needle in text for needle in needles]
    wanted = ", ".join(show(n) for n in needles)
    if spec.type == "contains_any":
        return any(found), f"expected the output to contain any of {wanted}, got {show(output)}"
    if spec.type == "not_contains":
        hits = ", ".join(show(n) for n, hit in zip(needles, found, strict=True) if hit)
        return not any(found), f"expected the output not to contain {hits}, got {show(output)}"
    missing = ", ".join(show(n) for n, hit in zip(needles, found, strict=True) if not hit)
    return all(found), f"expected the output to contain {missing}, got {show(output)}"


def _regex(spec: AssertionSpec, output: Any, example: Example) -> tuple[bool, str]:
    pattern: str = spec.params["pattern"]
    norm = _normalizer(spec)
    flags = re.IGNORECASE if spec.params.get("ignore_case", False) else 0
    passed = re.search(norm(pattern), norm(as_text(output)), flags) is not None
    return passed, f"expected a match for /{pattern}/, got {show(output)}"


_CHECKS: dict[str, Callable[[AssertionSpec, Any, Example], tuple[bool, str]]] = {
    "equals": _equals,
    "regex": _regex,
    **{name: _text_check for name in _TEXT_TYPES},
}
