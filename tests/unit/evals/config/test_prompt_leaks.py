"""Tests of `worker.evals.config.prompt_leaks`: a prompt holding the dataset's answers."""

from __future__ import annotations

from worker.evals.config.prompt_leaks import MIN_INLINED_CHARS, inlined_expected
from worker.evals.config.prompts import parse_prompt
from worker.evals.types import Example, Turn

ANSWER = "Refunds are issued within 14 days of the return"


def test_a_long_expected_answer_in_the_prompt_is_found_whatever_its_spacing_or_case() -> None:
    template = parse_prompt("Answer.\n{% set a = 'refunds are issued   within 14\n days of the "
                            "return' %}{{ input }}", "p.txt")
    examples = [Example("hit", 1, "q", ANSWER), Example("miss", 2, "q", "Something else "
                                                        "entirely, long enough")]
    assert inlined_expected(template, examples) == ["hit"]


def test_short_answers_are_never_flagged() -> None:
    template = parse_prompt("Say yes, no or 4. Categories: billing, shipping.", "p.txt")
    examples = [Example(str(i), i, "q", value)
                for i, value in enumerate(["yes", "4", "billing", 4, None, True], 1)]
    assert inlined_expected(template, examples) == []
    assert len("Categories: billing") < MIN_INLINED_CHARS


def test_structured_expected_and_conversations_count_by_their_strings() -> None:
    template = parse_prompt(f'[{{"role": "system", "content": "Known: {ANSWER}"}}, '
                            '{"role": "user", "content": "{{ input }}"}]', "p.json")
    examples = [Example("obj", 1, "q", {"reply": ANSWER, "n": 2}),
                Example("chat", 2, ["a", "b"], ["ok", ANSWER],
                        turns=(Turn("a", "ok"), Turn("b", ANSWER))),
                Example("clean", 3, "q", {"reply": "An answer the prompt never gives"})]
    assert inlined_expected(template, examples) == ["obj", "chat"]
