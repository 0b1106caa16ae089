"""Multi-turn examples in datasets: ``turns`` parses into `Turn` values, and every malformed
conversation is a config error at its dataset line."""

from __future__ import annotations

import json

import pytest

from worker.errors import ConfigError
from worker.evals.config.dataset import MAX_TURNS, parse_dataset
from worker.evals.types import AssertionSpec, Turn


def lines(*docs: object) -> str:
    return "".join(json.dumps(d) + "\n" for d in docs)


def test_a_conversation_parses_with_each_turns_input_expected_and_assertions() -> None:
    text = lines({"id": "a", "input": "one"}, {"id": "c", "vars": {"x": 1}, "turns": [
        {"input": "hi"}, {"input": "and?", "expected": "yes",
                          "assert": [{"type": "contains", "value": "y"}]}]})
    plain, talk = parse_dataset(text, "d.jsonl")
    assert plain.turns == ()
    assert talk.turns == (Turn("hi"), Turn("and?", "yes", (
        AssertionSpec("contains", {"value": "y"}, 2),)))
    assert (talk.input, talk.expected, talk.vars, talk.line) == (["hi", "and?"], [None, "yes"],
                                                                  {"x": 1}, 2)


@pytest.mark.parametrize(("doc", "words"), [
    ({"turns": []}, "non-empty list"),
    ({"turns": "hi"}, "non-empty list"),
    ({"turns": [{"expected": "x"}]}, "turn 1: missing `input`"),
    ({"turns": [{"input": "a"}, "b"]}, "turn 2 must be an object"),
    ({"turns": [{"input": "a", "vars": {}}]}, "turn 1: unknown key 'vars'"),
    ({"input": "a", "turns": [{"input": "b"}]}, "no top-level `input`"),
    ({"expected": "a", "turns": [{"input": "b"}]}, "no top-level `expected`"),
    ({"turns": [{"input": "a", "assert": [{"type": "nope"}]}]}, "nope"),
    ({"turns": [{"input": str(k)} for k in range(MAX_TURNS + 1)]}, f"at most {MAX_TURNS}"),
])
def test_a_malformed_conversation_is_an_error_at_its_line(doc: dict[str, object],
                                                          words: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_dataset(lines({"input": "fine"}, doc), "d.jsonl")
    assert (err.value.path, err.value.line) == ("d.jsonl", 2)
    assert words in err.value.message


def test_a_yaml_conversations_turns_take_inline_assertions() -> None:
    from worker.evals.config.dataset_formats import parse_any

    [talk] = parse_any("- id: c\n  turns:\n    - input: hi\n      contains: hello\n"
                       "    - input: bye\n", "d.yaml")
    assert talk.turns[0].assertions == (AssertionSpec("contains", {"value": "hello"}, 1),)
    assert talk.turns[1] == Turn("bye")
