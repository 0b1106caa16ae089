"""``settings.statistics`` and ``settings.sequential`` errors echo values as the YAML spells them.

Issue 15 F6e: ``looks: true`` was echoed as Python's ``True``.
"""

from __future__ import annotations

import pytest
import yaml

from worker.errors import ConfigError
from worker.evals.config.load import parse_config
from worker.evals.config.spelling import MAX_WRITTEN_CHARS, as_data, as_written

CONFIG = """version: 1
settings:
{settings}
suites:
  - name: s
    dataset: s.jsonl
    target: {{command: "x {{input_file}} {{output_file}}"}}
"""


@pytest.mark.parametrize(("settings", "message"), [
    ("  sequential: {looks: true}",
     "`settings.sequential.looks` must be an integer from 2 to 10, got true"),
    ("  sequential: {looks: 1.5}",
     "`settings.sequential.looks` must be an integer from 2 to 10, got 1.5"),
    ("  sequential: {looks: }",
     "`settings.sequential.looks` must be an integer from 2 to 10, got nothing"),
    ("  sequential: {looks: '4'}",
     "`settings.sequential.looks` must be an integer from 2 to 10, got '4'"),
    ("  sequential: {spending: no}",
     "`settings.sequential.spending` must be one of haybittle_peto, obrien_fleming, pocock, "
     "got no"),
    ("  sequential: 4",
     "`settings.sequential` must be true, false or {looks: 4, spending: haybittle_peto}, got 4"),
    ("  sequential: [looks, 4]",
     "`settings.sequential` must be true, false or {looks: 4, spending: haybittle_peto}, got "
     "['looks', 4]"),
    ("  statistics: {draws: ~}",
     "`settings.statistics.draws` must be an integer from 100 to 100000, got ~"),
    ("  statistics: {method: Null}",
     "`settings.statistics.method` must be one of signflip, holm, got Null"),
    ("  statistics: {primary_share: yes}",
     "`settings.statistics.primary_share` must be a number from 0 to 1, got yes"),
])
def test_errors_echo_the_yaml_spelling(settings: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(CONFIG.format(settings=settings))
    assert (err.value.line, err.value.message) == (3, message)


def _node(text: str) -> yaml.Node:
    node: yaml.Node = yaml.compose(f"key: {text}").value[0][1]
    return node


@pytest.mark.parametrize(("text", "written"), [
    ("true", "true"), ("False", "False"), ("yes", "yes"), ("~", "~"), ("null", "null"),
    ("", "nothing"), ("0x1F", "0x1F"), ("1e3", "'1e3'"), ("newest", "'newest'"),
    ("'true'", "'true'"), ('"a b"', "'a b'"), ("{looks: true, spending: [1, ~]}",
                                                "{looks: true, spending: [1, ~]}"),
    ("[]", "[]"), ("{}", "{}"), ("{a: }", "{a: null}"),
])
def test_as_written(text: str, written: str) -> None:
    assert as_written(_node(text)) == written


def test_as_written_clips_a_long_value() -> None:
    written = as_written(_node("[" + ", ".join(["x"] * 100) + "]"))
    assert len(written) == MAX_WRITTEN_CHARS and written.endswith("...")
    assert written.startswith("['x', 'x', ")


@pytest.mark.parametrize(("value", "written"), [
    (True, "true"), (None, "null"), (1.5, "1.5"), ("x", "'x'"), ([1, "a"], '[1, "a"]'),
    ({"k": False}, '{"k": false}'),
])
def test_as_data(value: object, written: str) -> None:
    assert as_data(value) == written
