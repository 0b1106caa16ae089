"""The dataset parser never crashes: random JSONL, mutated examples, huge lines and files."""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.budget import examples
from worker.errors import ConfigError
from worker.evals.config import dataset
from worker.evals.config.dataset import load_dataset, parse_dataset

KEYS = ["id", "input", "expected", "vars", "assert", "tags", "metadata", "type", "value",
        "values", "pattern", "ignore_case", "case_sensitive", "x"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
    | st.sampled_from(["contains", "equals", "regex", "not_contains", "contains_any"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner,
                                                                max_size=5),
    max_leaves=6)
VALID_LINE = {"id": "t1", "input": "Where is my refund?", "expected": "billing",
              "vars": {"lang": "en"}, "assert": [{"type": "contains", "value": "refund"}],
              "tags": ["must_pass"], "metadata": {"team": "support"}}


def _parse(text: str) -> None:
    """Parse; a ConfigError naming the file (and a real line) is fine, nothing else is."""
    try:
        examples = parse_dataset(text, "evals/x.jsonl")
    except ConfigError as err:
        assert err.path == "evals/x.jsonl" and err.message
        assert err.line is None or 1 <= err.line <= text.count("\n") + 1
        return
    assert all(1 <= e.line <= text.count("\n") + 1 for e in examples)


@given(st.text(max_size=300))
@settings(max_examples=examples(1500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_text(text: str) -> None:
    _parse(text)


@given(st.lists(st.tuples(st.sampled_from(KEYS), json_values), max_size=3), json_values)
@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_valid_lines_with_fields_replaced(changes: list[tuple[str, Any]], other: Any) -> None:
    line = dict(VALID_LINE)
    for key, value in changes:
        line[key] = value
    _parse(json.dumps(line) + "\n" + json.dumps(other))


@pytest.mark.parametrize(("text", "line", "words"), [
    ('{"input": "a"}\n{"input": "' + "x" * (1 << 20) + '"}\n', 2,
     "line 2 has 1048589 characters; the limit is 1048576 per example"),
    ('{"input": ' + "9" * 5000 + "}", 1, "invalid JSON: Exceeds the limit (4300 digits)"),
    ('{"input": ' + "[" * 100_000 + "]" * 100_000 + "}", 1, "invalid JSON: nested too deeply"),
    ('{"input": 1}\n[1]\n', 2, "each line must be a JSON object, got list"),
], ids=["huge-line", "5000-digits", "deep", "not-object"])
def test_hostile_lines_are_refused_with_their_line(text: str, line: int, words: str) -> None:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ConfigError) as info:
            parse_dataset(text, "evals/x.jsonl")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (info.value.line, info.value.path) == (line, "evals/x.jsonl")
    assert words in info.value.message
    assert time.perf_counter() - started < 5.0 and peak < 64 << 20


def test_too_many_examples(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dataset, "MAX_EXAMPLES", 3)
    with pytest.raises(ConfigError, match="more than 3 examples") as info:
        parse_dataset("\n".join(f'{{"input": {i}}}' for i in range(5)), "d.jsonl")
    assert info.value.line == 4


def test_file_over_the_cap_is_refused_without_reading_it_all(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    monkeypatch.setattr(dataset, "MAX_DATASET_BYTES", 1000)
    (tmp_path / "big.jsonl").write_text('{"input": "x"}\n' * 100)
    with pytest.raises(ConfigError, match=r"larger than 1000 bytes \(1500 bytes\)"):
        load_dataset(tmp_path, "big.jsonl")
    (tmp_path / "ok.jsonl").write_text('{"input": "x"}\n' * 10)
    assert len(load_dataset(tmp_path, "ok.jsonl")) == 10


def test_dataset_symlinked_outside_is_refused(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "secret.jsonl").write_text('{"input": "token"}\n')
    (tmp_path / "repo" / "d.jsonl").symlink_to(tmp_path / "secret.jsonl")
    with pytest.raises(ConfigError, match="outside the repository") as info:
        load_dataset(tmp_path / "repo", "d.jsonl")
    assert "token" not in str(info.value)
