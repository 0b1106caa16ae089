"""Datasets in JSON, YAML (inline assertions too) and CSV: parsed, and errors on their line."""

from __future__ import annotations

import json

import pytest

from worker.errors import ConfigError
from worker.evals.config.dataset_formats import parse_any
from worker.evals.config.load import parse_config

JSON_LIST = """[
  {"id": "a", "input": "hi", "expected": "hi"},

  {"id": "b", "input": {"q": "x"}, "contains_any": ["x", "y"]}
]
"""


def test_a_json_list_keeps_each_examples_line_and_inline_assertions():
    a, b = parse_any(JSON_LIST, "evals/d.json")
    assert (a.id, a.line, a.expected, b.id, b.line, b.input) == ("a", 2, "hi", "b", 4, {"q": "x"})
    assert [(s.type, s.params, s.line) for s in b.assertions] == [
        ("contains_any", {"values": ["x", "y"]}, 4)]


def test_a_json_object_with_examples_finds_the_list_after_other_keys():
    text = ('{"description": {"a": [1, 2]},\n "examples": [\n  {"input": "one"},\n'
            '  {"input": "two"}]}')
    assert [(e.id, e.line) for e in parse_any(text, "d.json")] == [("3", 3), ("4", 4)]


def test_minified_json_puts_every_example_on_line_1():
    text = json.dumps([{"id": "a", "input": "x"}, {"id": "b", "input": "y"}])
    assert [e.line for e in parse_any(text, "d.json")] == [1, 1]


YAML_INLINE = """examples:
  - id: refund
    input: Where is my refund?
    contains_any: [refund, billing]
    not_contains: sorry
    llm_judge: answers politely
  - id: hello
    input: hi
    regex: "^h"
    equals: true
    expected: hi
"""


def test_yaml_inline_assertions_become_the_examples_own():
    refund, hello = parse_any(YAML_INLINE, "evals/d.yaml")
    assert (refund.line, hello.line) == (2, 7)
    assert [(s.type, s.params) for s in refund.assertions] == [
        ("contains_any", {"values": ["refund", "billing"]}), ("not_contains", {"value": "sorry"}),
        ("llm_judge", {"rubric": "answers politely"})]
    assert [(s.type, s.params) for s in hello.assertions] == [
        ("regex", {"pattern": "^h"}), ("equals", {})]


CSV = 'ticket,question,label,lang\nt1,"Where is\nmy refund?",billing,en\n\nt2,Hello,greeting,fr\n'
COLUMNS = {"id": "ticket", "input": "question", "expected": "label"}


def test_csv_columns_are_mapped_and_the_rest_become_vars():
    t1, t2 = parse_any(CSV, "evals/d.csv", COLUMNS)
    assert (t1.id, t1.input, t1.expected, t1.vars, t1.line) == (
        "t1", "Where is\nmy refund?", "billing", {"lang": "en"}, 2)
    assert (t2.id, t2.line) == ("t2", 5)  # after a quoted cell spanning two lines and a blank


@pytest.mark.parametrize(("path", "text", "columns", "line", "words"), [
    ("d.json", '[\n {"input": "a"},\n {"input": "b",}\n]', None, 3, "invalid JSON"),
    ("d.json", '{"cases": []}', None, 1, "an `examples` list"),
    ("d.json", '[\n {"input": "a"},\n {"inptu": "b"}\n]', None, 3, "unknown key 'inptu'"),
    ("d.yaml", "- input: a\n- input: b\n  contains_any: 3\n", None, 2, "inline assertion"),
    ("d.yaml", "- input: a\n- input: [b\n", None, 3, "YAML syntax error"),
    ("d.yaml", "- {id: x, input: a}\n- {id: x, input: b}\n", None, 2, "duplicate id 'x'"),
    ("d.yaml", "- input: a\n  not_contains: {values: []}\n", None, 1, "non-empty list"),
    ("d.csv", "q,a\nx,y\n", {"input": "question"}, 1, "no column for input (column"),
    ("d.csv", "input,b\nx,y\nz\n", None, 3, "1 cells, but the header has 2"),
])
def test_a_bad_file_is_an_error_on_its_line(path, text, columns, line, words):
    with pytest.raises(ConfigError) as exc:
        parse_any(text, path, columns)
    assert (exc.value.path, exc.value.line) == (path, line)
    assert words in exc.value.message


def test_columns_are_parsed_and_refused_on_a_dataset_that_is_not_csv():
    base = "version: 1\nsuites:\n  - name: s\n    dataset: {ds}\n    target: {{command: " \
           "'x {{input_file}} {{output_file}}'}}\n    columns: {{input: question}}\n"
    config = parse_config(base.format(ds="evals/d.csv"))
    assert config.suites[0].columns == (("input", "question"),)
    with pytest.raises(ConfigError) as exc:
        parse_config(base.format(ds="evals/d.jsonl"))
    assert exc.value.line == 6 and "a .csv dataset" in exc.value.message
    with pytest.raises(ConfigError) as exc:
        parse_config(base.format(ds="evals/d.csv").replace("input: question", "inpt: q"))
    assert exc.value.line == 6
