"""The config parser never crashes: random and mutated configs, YAML bombs, huge lines.

Every input must give a `Config` or a `ConfigError` (which the report shows with its line);
any other exception would be a stack trace in the check run.
"""

from __future__ import annotations

import copy
import time
import tracemalloc
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.budget import examples
from worker.errors import ConfigError
from worker.evals.config import safe_yaml
from worker.evals.config.load import parse_config
from worker.evals.types import Config

VALID: dict[str, Any] = {
    "version": 1,
    "untrusted": "approve",
    "settings": {"timeout": 30, "concurrency": 2, "env": ["OPENAI_API_KEY"]},
    "suites": [{
        "name": "tickets", "dataset": "evals/t.jsonl",
        "target": {"command": "python3 bot.py {input_file} {output_file}"},
        "assertions": [{"type": "contains", "value": "refund"}, {"type": "equals"}],
        "gate": {"pass_rate": {"min": 0.8, "max_drop": 0.05}},
    }],
}
PATHS = [(), ("version",), ("untrusted",), ("settings",), ("settings", "timeout"),
         ("settings", "concurrency"), ("settings", "env"), ("suites",), ("suites", 0),
         ("suites", 0, "name"), ("suites", 0, "dataset"), ("suites", 0, "target"),
         ("suites", 0, "target", "command"), ("suites", 0, "assertions"),
         ("suites", 0, "assertions", 0), ("suites", 0, "assertions", 0, "value"),
         ("suites", 0, "gate"), ("suites", 0, "gate", "pass_rate"),
         ("suites", 0, "gate", "pass_rate", "min")]
TOKENS = [":", " ", "\n", "  ", "- ", "[", "]", "{", "}", ",", "&a ", "*a", "&b ", "*b", "<<: ",
          "!!python/object:os.system ", "!!int ", "!!binary ", "? ", "|", ">", "'", '"', "#",
          "%YAML 1.1\n", "---\n", "...\n", "version", "suites", "name", "1", "-1e999", "~",
          "9" * 5000, "\t", "\\", "\x85", "\ufeff"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                max_size=4),
    max_leaves=8)


def _parse(text: str) -> Config | None:
    """Parse; a ConfigError is a fine answer, anything else fails the test."""
    try:
        return parse_config(text, ".llmgate.yml")
    except ConfigError as err:
        assert err.path == ".llmgate.yml" and err.message
        breaks = sum(text.count(c) for c in "\n\r\x85\u2028\u2029")  # YAML 1.1 line breaks
        assert err.line is None or 1 <= err.line <= breaks + 2
        return None


def test_the_valid_config_parses() -> None:
    config = _parse(yaml.safe_dump(VALID))
    assert config is not None and config.suites[0].name == "tickets"


@given(st.text(max_size=400))
@settings(max_examples=examples(700), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_text(text: str) -> None:
    _parse(text)


@given(st.lists(st.sampled_from(TOKENS), max_size=40).map("".join))
@settings(max_examples=examples(900), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_yaml_token_soup(text: str) -> None:
    _parse(text)


@given(st.sampled_from(PATHS), json_values, st.booleans())
@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_valid_config_with_one_field_replaced(path: tuple[Any, ...], value: Any,
                                              flow: bool) -> None:
    data: Any = copy.deepcopy(VALID)
    if not path:
        data = value
    else:
        node = data
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = value
    _parse(yaml.safe_dump(data, default_flow_style=flow, allow_unicode=True))


def _bomb(levels: int, fanout: int) -> str:
    lines = ["version: 1", "a0: &a0 [lol]"]
    for level in range(1, levels + 1):
        refs = ", ".join([f"*a{level - 1}"] * fanout)
        lines.append(f"a{level}: &a{level} [{refs}]")
    lines.append("suites: [{name: x, dataset: d.jsonl, target: {command: 'c {input_file} "
                 f"{{output_file}}'}}, assertions: [{{type: contains, value: *a{levels}}}]}}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("text", "line", "words"), [
    (_bomb(9, 10), 7, "expands to more than 100000 values"),  # a5 = 211111 nodes, line 7
    ("version: 1\nbig: &big\n" + "  - x\n" * 2000 +
     "suites: [" + ", ".join(["*big"] * 60) + "]\n", 2003, "expands to more than 100000 values"),
    ("version: 1\nsuites: &s [*s]\n", 2, "refers to the structure that contains it"),
    ("version: 1\nsuites: " + "[" * 80 + "]" * 80 + "\n", 2, "nested more than 64 levels"),
    ("version: 1\nsuites: " + "[" * 5000 + "]" * 5000 + "\n", 2, "has 10008 characters"),
    ("version: 1\nk0: {a: " + "{a: " * 70 + "1" + "}" * 71 + "\n", 2,
     "nested more than 64 levels"),
    ("version: 1\n# " + "x" * 20_000 + "\nsuites: []\n", 2, "line 2 has 20002 characters; the "
     "limit is 10000"),
    ("a: &a x\n" + "b: [" + ", ".join(["*a"] * 1001) + "]\n", 2, "more than 1000 aliases"),
    ("version: 1\nsettings: {concurrency: " + "9" * 5000 + "}\nsuites: []\n", 2,
     "YAML value error"),
    ("version: 1\nuntrusted: sometimes\nsuites: []\n", 2,
     "`untrusted` must be one of approve, never, run, got 'sometimes'"),
    ("version: 1\nsettings:\n  concurrency: 100000\nsuites: []\n", 3,
     "`concurrency` may be at most 64, got 100000"),
    ("version: 1\nsettings: {timeout: 86400}\nsuites: []\n", 2,
     "`timeout` may be at most 3600 seconds, got 86400"),
], ids=["billion-laughs", "huge-anchor", "recursive-alias", "deep-80", "deep-5000-long-line",
        "deep-in-key", "long-comment", "many-aliases", "5000-digits", "bad-untrusted",
        "fork-bomb-concurrency", "endless-timeout"])
def test_bombs_and_huge_input_are_refused_fast_and_small(text: str, line: int,
                                                         words: str) -> None:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ConfigError) as info:
            parse_config(text, ".llmgate.yml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert words in info.value.message
    assert info.value.line == line
    assert time.perf_counter() - started < 10.0  # generous: tracemalloc slows parsing down
    assert peak < 64 << 20, f"peak {peak} bytes"


def test_a_text_over_the_size_cap_is_refused_before_parsing() -> None:
    text = "version: 1\n" + ("# comment\n" * (safe_yaml.MAX_YAML_CHARS // 10 + 1))
    with pytest.raises(ConfigError, match=r"the file has \d+ characters; the limit is 1048576"):
        parse_config(text)


def test_anchors_within_bounds_still_work() -> None:
    text = ("version: 1\nsuites:\n"
            "  - name: a\n    dataset: a.jsonl\n"
            "    target: &cmd {command: 'python3 b.py {input_file} {output_file}'}\n"
            "  - name: b\n    dataset: b.jsonl\n    target: *cmd\n")
    config = parse_config(text)
    assert [(s.name, s.target.command) for s in config.suites] == [
        ("a", "python3 b.py {input_file} {output_file}"),
        ("b", "python3 b.py {input_file} {output_file}")]
