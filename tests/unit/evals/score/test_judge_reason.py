"""An llm_judge's failure reason is the judge's own explanation, clipped, not the rubric."""

from __future__ import annotations

from worker.evals.llm_types import Endpoint
from worker.evals.score.judge_parse import REASON_CHARS, explanation
from worker.evals.score.judges import JudgeSpec, combine

RUBRIC = "Answers the customer's refund question politely and " + "x" * 200
JS = JudgeSpec(RUBRIC, Endpoint("openai/judge"))


def test_the_explanation_drops_the_verdict_line() -> None:
    reply = "The answer never mentions the refund.\nIt is curt.\n\n**VERDICT: FAIL**"
    assert explanation(reply) == "The answer never mentions the refund. It is curt."
    assert explanation("SCORE: 2") == ""
    assert explanation("FAIL") == ""
    assert explanation('{"verdict": "fail", "reason": "off topic"}') == "off topic"


def test_a_decorated_verdict_line_is_no_explanation() -> None:
    """Issue 31: the verdict lines the reader now reads are not the judge's reason either."""
    for line in ("\u274c FAIL", "<verdict>FAIL</verdict>", "**FAIL** \U0001f44e"):
        assert explanation(f"It invents a fee.\n{line}") == "It invents a fee.", line


def test_a_long_explanation_is_clipped() -> None:
    reason = explanation("word " * 400 + "\nVERDICT: FAIL")
    assert len(reason) == REASON_CHARS and reason.endswith("...")


def test_failure_message_is_the_judges_reason_not_the_rubric() -> None:
    result = combine(JS, [0.0], [], reasons=["The answer never mentions the refund."])
    assert result.message == "the judge failed it: The answer never mentions the refund."
    assert "politely" not in result.message
    assert result.details["reason"] == "The answer never mentions the refund."


def test_the_reason_comes_from_a_vote_on_the_winning_side() -> None:
    js = JudgeSpec(RUBRIC, Endpoint("openai/judge"), n=3)
    result = combine(js, [1.0, 0.0, 0.0], [], reasons=["fine", "", "misses the refund"])
    assert result.message == "the judge failed it: misses the refund"


def test_graded_failure_and_no_reason() -> None:
    js = JudgeSpec(RUBRIC, Endpoint("openai/judge"), scale="1-5")
    graded = combine(js, [0.25], [], reasons=["too vague"])
    assert graded.message == "judge score 0.25 < 0.75: too vague"
    silent = combine(JS, [0.0], [], reasons=[""])
    assert silent.message == "the judge failed it (the judge gave no reason)"
