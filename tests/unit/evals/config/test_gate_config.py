"""Parsing of the statistical gate rules and options, and of example tags and metadata."""

from __future__ import annotations

import pytest

from worker.errors import ConfigError
from worker.evals.config.dataset import parse_dataset
from worker.evals.config.load import parse_config
from worker.evals.types import GateOptions, GateRule

HEAD = """\
version: 1
suites:
  - name: s
    dataset: d.jsonl
    target: {command: "run {input_file} {output_file}"}
    gate:
"""


def parse(gate: str) -> tuple[dict[str, GateRule], GateOptions]:
    suite = parse_config(HEAD + gate).suites[0]
    return suite.gate, suite.gate_options


def test_every_rule_and_option_parses() -> None:
    rules, options = parse("""\
      pass_rate:
        min: 0.8
        max_drop: 0.05
        regression: {alpha: 0.05}
        non_inferiority_margin: 0.03
        max_new_failures: 2
        min_detectable: {drop: 0.05, action: warn}
      mean_score:
        min_detectable: 0.1
      critical: {tag: must_pass}
      groups: {by: category, min_items: 8}
      on_inconclusive: fail
      quarantine: [t17, 33]
""")
    assert rules["pass_rate"] == GateRule("pass_rate", 0.8, 0.05, 7, 0.05, 0.03, 2, 0.05, "warn")
    assert rules["mean_score"] == GateRule("mean_score", line=14, min_detectable=0.1)
    assert options == GateOptions(("must_pass",), "category", 8, "fail", ("t17", "33"), 7)


def test_defaults() -> None:
    rules, options = parse("      pass_rate: {regression: {alpha: 0.1}}\n"
                           "      critical: {tag: [a, b]}\n      groups: {by: lang}\n")
    assert rules["pass_rate"].regression_alpha == 0.1
    assert rules["pass_rate"].min_detectable_action == "fail"
    assert (options.critical_tags, options.group_min_items, options.on_inconclusive) == (
        ("a", "b"), 5, "undecided")  # unset: settings.undecided decides (issue 12)
    assert parse_config(HEAD.replace("    gate:\n", "")).suites[0].gate_options == GateOptions()


@pytest.mark.parametrize(("gate", "line", "words"), [
    ("      pass_rate: {regression: {alpha: 0}}\n", 7, "`alpha` of `regression` of 'pass_rate' "
     "must be a number between 0 and 1 (exclusive; 0.05 is usual), got 0"),
    ("      pass_rate: {regression: {alpha: 1.5}}\n", 7, "between 0 and 1"),
    ("      pass_rate: {regression: {}}\n", 7, "needs `alpha`"),
    ("      pass_rate: {regression: 0.05}\n", 7, "must be a mapping"),
    ("      pass_rate: {regression: {alfa: 0.05}}\n", 7, "unknown key 'alfa'"),
    ("      pass_rate: {non_inferiority_margin: -0.1}\n", 7, "must be a number 0 or more"),
    ("      pass_rate: {non_inferiority_margin: .inf}\n", 7, "0 or more"),
    ("      pass_rate: {max_new_failures: -1}\n", 7, "must be an integer >= 0, got -1"),
    ("      pass_rate: {max_new_failures: 1.5}\n", 7, "integer >= 0"),
    ("      pass_rate: {min_detectable: 0}\n", 7, "must be a number above 0"),
    ("      pass_rate: {min_detectable: {drop: 0.05, action: panic}}\n", 7,
     "`action` must be one of fail, warn, got 'panic'"),
    ("      pass_rate: {min_detectable: {action: warn}}\n", 7, "needs `drop`"),
    ("      pass_rate: {}\n", 7, "needs `min` or `max_drop`, or one of regression"),
    ("      critical: {}\n", 7, "`critical` needs `tag`"),
    ("      critical: {tag: []}\n", 7, "`critical.tag` needs at least one tag"),
    ("      critical: {tags: x}\n", 7, "unknown key 'tags'"),
    ("      groups: {min_items: 3}\n", 7, "`groups` needs `by`"),
    ("      groups: {by: category, min_items: 0}\n", 7, "`groups.min_items` must be an integer "
     ">= 1, got 0"),
    ("      on_inconclusive: maybe\n", 7, "`on_inconclusive` must be one of pass, neutral, fail, "
     "got 'maybe'"),
    ("      quarantine: [{a: 1}]\n", 7, "`quarantine` entries must be ids or names"),
    ("      quarantine: {a: 1}\n", 7, "`quarantine` must be a list"),
    ("      latency: {min: 1}\n", 7, "unknown metric 'latency' in `gate`"),
    ("      latency_p50: {regression: {alpha: 0.05}}\n", 7, "`regression` of 'latency_p50' "
     "compares examples one by one, but latency_p50 is not a mean over examples"),
])
def test_errors_name_the_line(gate: str, line: int, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(gate)
    assert info.value.line == line
    assert words in info.value.message


def test_options_are_not_metrics() -> None:
    with pytest.raises(ConfigError, match="options: critical, groups, on_inconclusive"):
        parse("      criticall: {tag: x}\n")


def test_dataset_accepts_tags_and_metadata() -> None:
    (example,) = parse_dataset('{"id": "t1", "input": "x", "tags": ["must_pass"], '
                               '"metadata": {"category": "billing"}}\n', "d.jsonl")
    assert (example.tags, example.metadata) == (("must_pass",), {"category": "billing"})
    for line, words in (('{"input": 1, "tags": "must_pass"}', "`tags` must be a list"),
                        ('{"input": 1, "tags": [""]}', "non-empty strings"),
                        ('{"input": 1, "metadata": [1]}', "`metadata` must be a JSON object")):
        with pytest.raises(ConfigError, match=words):
            parse_dataset(line, "d.jsonl")
