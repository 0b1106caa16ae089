"""``llmgate dataset check`` reads the multiple-choice questions of a consistency suite (issue 33).

It refused them (``unknown key 'options'``), though a consistency suite reads nothing else
(docs/consistency.md). Through `main` on the quiz example's dataset and on files written here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worker.cli.main import main

QUIZ = Path(__file__).parents[3] / "examples" / "quiz-consistency"


def question(qid: str, stem: str, correct: str = "A") -> str:
    """One JSONL line of a two-option question whose option ``correct`` is right."""
    options = [{"label": label, "text": f"{stem} {label}", "is_correct": label == correct}
               for label in ("A", "B")]
    return json.dumps({"id": qid, "stem": stem, "options": options}) + "\n"


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["dataset", "check", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("config", [False, True])
def test_the_quiz_examples_questions_are_checked(capsys, monkeypatch, config):
    monkeypatch.chdir(QUIZ)
    code, out, _ = check(capsys, "evals/quiz.jsonl", *(["--config", ".llmgate.yml"] * config))
    assert (code, out) == (0, "llmgate: 12 questions, 0 findings\n")


def test_questions_have_findings_and_errors_of_their_own(tmp_path, capsys):
    skewed = tmp_path / "skewed.jsonl"
    skewed.write_text("".join(question(f"q{i}", f"stem {i}") for i in range(5))
                      + question("q5", "stem 0", correct="B"))
    code, out, _ = check(capsys, str(skewed))
    assert code == 1
    assert f"{skewed}:line 6: question 'q5' has the same stem as line 1\n" in out
    assert f"{skewed}:label balance: 5 of 6 questions have 'A' as the correct option\n" in out
    broken = tmp_path / "broken.jsonl"
    broken.write_text(question("q1", "one") + question("q1", "two"))
    code, out, err = check(capsys, str(broken))
    assert (code, out) == (2, "")
    assert "duplicate id 'q1'" in err and ":2" in err
