"""Reading which option a free-text answer names (worker/evals/score/mc_answer.py)."""

from __future__ import annotations

import pytest

from worker.evals.score.mc_answer import extract

OPTIONS = [("A", "Paris"), ("B", "Lyon"), ("C", "Nice"), ("D", "Lille")]


@pytest.mark.parametrize(("reply", "label"), [
    ("B", "B"), ("(b).", "B"), ("  **C**  ", "C"),
    ("Answer: D", "D"), ("answer: (A)", "A"), ("The answer is option C.", "C"),
    ("I first thought Answer: A, but no. Answer: B", "B"),  # the last statement wins
    ("It is Lyon, of course.", "B"),  # the text of exactly one option
    ("B) Lyon", "B"), ("[D] because", "D"),
    ("A good guess would be Nice", "C"),  # "A" the word is no label; one option's text
    # explicit phrases read the label in any case (tester16 hole 6: "the answer is b")
    ("the answer is b", "B"), ("THE ANSWER IS C.", "C"), ("answer: d", "D"),
    ("the answer is (b), Lyon", "B"), ("option b", "B"), ("I'd go with option c.", "C"),
    ("Option d is right: Lille.", "D"), ("Option B, not Paris", "B"),
    ("answer: b. Option c was close", "B"),  # a statement outranks a mention
    ("the answer is a", "A"), ("the answer is a bit unclear, but Lille", "D"),  # "a" the word
])
def test_names_an_option(reply: str, label: str) -> None:
    assert extract(reply, OPTIONS) == label


@pytest.mark.parametrize("reply", [
    "", "I do not know.", "Paris or Lyon", "Answer: E", "Between B and C", "ABC",
    "option b or option c", "the answer is e",
])
def test_unparseable(reply: str) -> None:
    assert extract(reply, OPTIONS) is None


def test_numbered_labels_longest_first() -> None:
    options = [(str(i), f"x{i}") for i in range(1, 12)]
    assert extract("Answer: 11", options) == "11"
    assert extract("Answer: 1", options) == "1"
