"""Tests of `worker.evals.score.assertions`: every type, its options, and its messages."""

from __future__ import annotations

from typing import Any

import pytest

from worker.errors import ConfigError
from worker.evals.score.assertions import KNOWN_ASSERTIONS, check, show, validate_spec
from worker.evals.types import AssertionSpec, Example


def run(kind: str, output: Any, expected: Any = None, **params: Any) -> tuple[bool, str]:
    spec = AssertionSpec(kind, params, 3)
    validate_spec(spec, "x.yml")
    result = check(spec, output, Example("e1", 1, "in", expected))
    assert result.type == kind
    assert result.score == (1.0 if result.passed else 0.0)
    return result.passed, result.message


def test_known_assertions() -> None:
    assert set(KNOWN_ASSERTIONS) == {
        "equals", "contains", "contains_any", "contains_all", "not_contains", "regex",
        "json_valid", "json_schema", "starts_with", "length", "is_one_of", "classification",
        "latency", "cost", "llm_judge", "similar", "python", "pairwise", "mc_answer",
        "pii", "refusal", "harmful", "composite",
        "recall_at_k", "precision_at_k", "hit_at_k", "mrr", "ndcg_at_k",
        "tools_called", "tools_not_called", "max_tool_calls", "tool_arguments", "trajectory",
        "max_steps", "trajectory_judge"}


@pytest.mark.parametrize(
    ("output", "expected", "params", "passed"),
    [
        ("billing", "billing", {}, True),
        ("  billing\n", "billing ", {}, True),
        ("Billing", "billing", {}, False),
        ("Billing", "billing", {"ignore_case": True}, True),
        ("billing.", "billing", {}, False),
        ({"b": 2, "a": 1}, {"a": 1, "b": 2}, {}, True),
        ({"a": 1}, {"a": 2}, {}, False),
        (42, 42.0, {}, True),
        ("42", 42, {}, True),
        (" [1, 2] ", [1, 2], {}, True),
        (True, 1, {}, False),
        (None, None, {}, False),
        ("not json", 7, {}, False),
    ],
)
def test_equals(output: Any, expected: Any, params: dict[str, Any], passed: bool) -> None:
    assert run("equals", output, expected, **params)[0] is passed


def test_equals_messages() -> None:
    passed, message = run("equals", "shipping", "billing")
    assert not passed
    assert message == 'expected "billing", got "shipping"'
    passed, message = run("equals", "anything", None)
    assert not passed
    assert "no `expected` value" in message


@pytest.mark.parametrize(
    ("kind", "output", "params", "passed"),
    [
        ("contains", "Your REFUND is on its way", {"value": "refund"}, True),
        ("contains", "Your REFUND", {"value": "refund", "case_sensitive": True}, False),
        ("contains", "refund and order", {"values": ["refund", "order"]}, True),
        ("contains", "refund only", {"values": ["refund", "order"]}, False),
        ("contains_all", "refund only", {"values": ["refund", "order"]}, False),
        ("contains_all", "order, refund", {"values": ["refund", "order"]}, True),
        ("contains_any", "order only", {"values": ["refund", "order"]}, True),
        ("contains_any", "nothing", {"values": ["refund", "order"]}, False),
        ("not_contains", "all fine", {"values": ["sorry", "apolog"]}, True),
        ("not_contains", "We APOLOGIZE", {"values": ["sorry", "apolog"]}, False),
        ("not_contains", "We APOLOGIZE", {"value": "apolog", "case_sensitive": True}, True),
        ("contains", {"label": "Billing"}, {"value": '"label": "billing"'}, True),
        ("contains", 1234, {"value": "23"}, True),
    ],
)
def test_text_assertions(kind: str, output: Any, params: dict[str, Any], passed: bool) -> None:
    assert run(kind, output, **params)[0] is passed


def test_text_messages_say_what_is_missing() -> None:
    assert run("contains", "refund only", values=["refund", "order"])[1] == (
        'expected the output to contain "order", got "refund only"')
    assert run("not_contains", "sorry!", value="Sorry")[1] == (
        'expected the output not to contain "sorry", got "sorry!"')
    assert run("contains_any", "x", values=["a", "b"])[1] == (
        'expected the output to contain any of "a", "b", got "x"')


#: A forbidden value hidden by code points that do not change what a reader sees: each output
#: passed `not_contains` before it read folded text (worker/security/text_fold.py).
HIDDEN_CANARIES = [
    "Summary: fine. CANARY\u200b-7f3a9c",  # zero-width space
    "Summary: fine. CANA\u00adRY-7f3a9c",  # soft hyphen
    "Summary: fine. CANARY\u20117f3a9c",  # non-breaking hyphen
    "Summary: fine. C\u0410NARY-7f3\u0430\ufeff9c",  # Cyrillic А/а, byte-order mark
    "Summary: fine. \uff23\uff21\uff2e\uff21\uff32\uff39-7f3a9c",  # fullwidth letters
    "Summary: fine. C\u0332ANARY-7\u0301f\u03323\u0332a9\u20e3c\u0332",  # combining marks
]


@pytest.mark.parametrize("output", HIDDEN_CANARIES)
def test_not_contains_sees_a_value_hidden_by_invisible_or_look_alike_characters(
        output: str) -> None:
    assert run("not_contains", output, value="CANARY-7f3a9c") == (
        False, f'expected the output not to contain "canary-7f3a9c", got {show(output)}')
    assert not run("not_contains", output, value="CANARY-7f3a9c", case_sensitive=True)[0]
    assert run("not_contains", "Summary: fine. CANARY 7f3a9c", value="CANARY-7f3a9c")[0]


def test_not_contains_folds_its_values_too() -> None:
    assert not run("not_contains", "the CANARY-7f3a9c", value="CANARY\u200b\u20117f3a9c")[0]
    assert not run("not_contains", "the CANARY-7f3a9c", value="C\u0332ANARY-7f3a9c")[0]


@pytest.mark.parametrize(("output", "value"), [
    ("2\u00b9\u2070", "210"),  # 2 to the 10th (1024) is not 210, though NFKC reads it so
    ("step \u2460", "step 1"),  # a circled 1
    ("ref\u200bund", "refund"),
])
def test_contains_matches_the_raw_text(output: str, value: str) -> None:
    assert not run("contains", output, value=value)[0]


@pytest.mark.parametrize(
    ("output", "params", "passed"),
    [
        ("Order #12345 shipped", {"pattern": r"#\d{5}\b"}, True),
        ("Order #1234 shipped", {"pattern": r"#\d{5}\b"}, False),
        ("HELLO", {"pattern": "^hello$"}, False),
        ("HELLO", {"pattern": "^hello$", "ignore_case": True}, True),
        ({"n": 5}, {"pattern": r'"n": 5'}, True),
    ],
)
def test_regex(output: Any, params: dict[str, Any], passed: bool) -> None:
    assert run("regex", output, **params)[0] is passed


def test_regex_message() -> None:
    assert run("regex", "abc", pattern=r"\d")[1] == r'expected a match for /\d/, got "abc"'


def test_long_values_are_clipped() -> None:
    passed, message = run("equals", "x" * 5000, "y")
    assert not passed
    assert len(message) < 300
    assert message.endswith("... (5002 chars)")
    assert show("short") == '"short"'


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (AssertionSpec("fuzzy", {}, 4), "unknown assertion type 'fuzzy' (known types: equals"),
        (AssertionSpec("equals", {"value": "x"}, 4), "unknown option 'value'"),
        (AssertionSpec("regex", {"pattern": "[a-"}, 4), "invalid regex pattern"),
        (AssertionSpec("regex", {"pattern": ""}, 4), "needs `pattern`"),
        (AssertionSpec("contains", {"values": "abc"}, 4), "non-empty list"),
        (AssertionSpec("contains", {"values": ["a", ""]}, 4), "non-empty string"),
        (AssertionSpec("contains", {"value": "a", "case_sensitive": 1}, 4), "true or false"),
    ],
)
def test_validate_spec_errors(spec: AssertionSpec, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_spec(spec, "evals/d.jsonl")
    assert (info.value.path, info.value.line) == ("evals/d.jsonl", 4)
    assert words in info.value.message
