"""Judge replies as real judges write them, and the verdict each must give (fail closed)."""

from __future__ import annotations

import pytest

from worker.evals.llm_types import Endpoint
from worker.evals.score.judge_parse import parse_pick, parse_verdict
from worker.evals.score.judges import JudgeSpec, combine
from worker.evals.score.pairwise import combine_picks

PASS, FAIL, UNSCORED = 1.0, 0.0, None

#: The field case: 7 passes, 2 failures, 3 unscored.
FIELD_CASES = [
    ("PASS", PASS), ("pass", PASS), ("PASS.", PASS), ("**Pass**", PASS),
    ("Verdict: pass", PASS), ("PASS\u200b", PASS), ('```json\n{"verdict":"pass"}\n```', PASS),
    ("FAIL", FAIL), ("The reply bypasses the policy. VERDICT: FAIL", FAIL),
    ("PASSFAIL", UNSCORED), ("", UNSCORED), ("I can't judge this", UNSCORED),
]

MORE_REPLIES = [
    ("The answer cites the refund policy correctly.\n\nVERDICT: PASS", PASS),
    ("VERDICT: FAIL\n\nThe answer invents a 90-day window.", FAIL),
    ("Final verdict: **FAIL**", FAIL),
    ("Result - passed", PASS),
    ("`FAIL`", FAIL),
    ("# PASS", PASS),
    ("> Pass!", PASS),
    ('{"verdict": "FAIL", "reason": "off topic"}', FAIL),
    ('{"pass": true}', PASS),
    ('{"passed": false, "why": "rude"}', FAIL),
    ('{"score": 1}', PASS),
    ('{"reason": "looks fine"}', UNSCORED),
    ("```json\n{not json}\n```", UNSCORED),
    ("It would pass if it named the fee, but it does not. Verdict: FAIL", FAIL),
    ("Verdict: PASS\nOn reflection, Verdict: FAIL", UNSCORED),
    ("PASS\n...\nFAIL", UNSCORED),
    ("The bot tries to bypass the filter.", UNSCORED),
    ("passing grade", UNSCORED),
    ("\u200b\u200b", UNSCORED),
    ("\ufeffFAIL", FAIL),
    ("N/A", UNSCORED),
]

#: Field cases read wrongly before: two different verdicts, or keys that disagree, are judge
#: errors; the replies above keep their verdicts.
TWO_VERDICTS = [
    ("PASS\nVerdict: FAIL", UNSCORED),
    ('```json\n{"verdict": "pass"}\n```\nVerdict: FAIL', UNSCORED),
    ('{"pass": true, "verdict": "fail"}', UNSCORED),
    ('{"verdict": "pass", "score": 0}', UNSCORED),
    ('{"verdict": "pass", "score": 4}', UNSCORED),  # a score on another scale
    ('```json\n{"verdict": "pass"}\n```\nVerdict: PASS', PASS),
    ('{"verdict": "pass", "score": 1}', PASS),
    ("Verdict: PASS\n\nPASS", PASS),
]

#: Issue 31: replies that commit to one verdict but dress it (an emoji, markup tags, a hedge
#: about tone or style after it) were judge errors, which failed honest pull requests.
DECORATED: list[tuple[str, float | None]] = [
    ("\u2705 PASS", PASS), ("PASS \u2705", PASS), ("**PASS** \U0001f44d", PASS),
    ("\u274c FAIL", FAIL), ("Verdict: \u2705 PASS", PASS),
    ("The answer gives the code.\n\n**Verdict:** \u2714\ufe0f PASS", PASS),
    ("<verdict>PASS</verdict>", PASS), ("<answer>FAIL</answer>", FAIL),
    ("The reply names the fee.\n<verdict>\nPASS\n</verdict>", PASS),
    ("<thinking>It cites the refund policy.</thinking>\n<answer>PASS</answer>", PASS),
    ("<result> **Fail** </result>", FAIL),
    ("PASS, though the tone could be warmer", PASS),
    ("Fail. The style is fine, but it invents a 90-day window.", FAIL),
    ("PASS - the wording is a little stiff", PASS),
    ("Pass (the style could be tighter).", PASS),
    ("The answer is right.\nPASS, but the tone could be warmer", PASS),
    ("**FAIL** \u2014 polite, but the fee is wrong \U0001f44e", FAIL),
]
#: ... and what stays a judge error: both verdicts as a decision, emoji that say the other
#: verdict, a tag around something else, a verdict word that is not one.
STILL_UNREAD: list[tuple[str, float | None]] = [
    ("\u2705 FAIL", UNSCORED), ("PASS \u274c", UNSCORED), ("PASS, but FAIL on tone", UNSCORED),
    ("<verdict>PASS</verdict>\n<verdict>FAIL</verdict>", UNSCORED),
    ("<verdict>PASS</verdict>\nVERDICT: FAIL", UNSCORED), ("PASS or FAIL", UNSCORED),
    ("\u2705", UNSCORED), ("Pass-through is fine here.", UNSCORED),
    # fresh user of issue 31: the other verdict on the next line was read as none
    ("PASS\nHowever, it could FAIL on tone.", UNSCORED),
    ("PASS\nthough a stricter grader would say FAIL", UNSCORED),
    ("FAIL \u274c\nbut PASS if tone is ignored", UNSCORED),
    ("Fail to see what the ticket asks.", UNSCORED),
    ("<answer>The code is basil-1</answer>", UNSCORED),
]
#: Replies in the shapes of the peers' judges (their docs and trackers), as llmgate's prompt may
#: get them from a judge used to another tool, and what a careful reader takes from each.
PEER_REPLIES: list[tuple[str, float | None]] = [
    # promptfoo llm-rubric: {"reason", "score" 0.0-1.0, "pass"}
    ('{"reason": "The reply greets the customer and answers.", "score": 1.0, "pass": true}',
     PASS),
    ('{"reason": "It apologises twice.", "score": 0.0, "pass": false}', FAIL),
    ('```json\n{"reason": "Concise.", "pass": true, "score": 1}\n```', PASS),
    ('{"reason": "Mostly concise.", "score": 0.8, "pass": true}', UNSCORED),  # 0.8 of what?
    # DeepEval: G-Eval's 0-10 score; the yes/no verdicts of its statement metrics
    ('{"score": 8, "reason": "Coherent and mostly relevant."}', UNSCORED),
    ('{"verdict": "yes", "reason": "The claim is supported."}', UNSCORED),
    ('{"verdicts": [{"verdict": "yes"}, {"verdict": "no", "reason": "no fee"}]}', UNSCORED),
    # Ragas: AspectCritic's 0/1 verdict; faithfulness's per-statement verdicts
    ('{"reason": "The response is harmless.", "verdict": 1}', PASS),
    ('{"reason": "It invents a fee.", "verdict": 0}', FAIL),
    ('{"statements": [{"statement": "Refunds take 5 days.", "verdict": 1}]}', UNSCORED),
    # OpenAI evals model-graded: "Y"/"N" choice strings, the fact eval's letters
    ("The submission names the refund window.\nY", UNSCORED), ("N", UNSCORED),
    ("(B)", UNSCORED),
    # LangChain / LangSmith: the QA grader's CORRECT; openevals' boolean score
    ("GRADE: CORRECT", UNSCORED),
    ('{"reasoning": "It answers the ticket politely.", "score": true}', PASS),
    ('{"reasoning": "It ignores the question.", "score": false}', FAIL),
    # Braintrust autoevals: a choice letter that the eval's own choice_scores map
    ('{"reasons": "The output matches the expert answer.", "choice": "C"}', UNSCORED),
    # MT-Bench: a 1-10 rating, a pairwise pick
    ("The reply is helpful and accurate. Rating: [[8]]", UNSCORED), ("[[A]]", UNSCORED),
    # Prometheus: "Feedback: ... [RESULT] ..."
    ("Feedback: The answer cites the policy and the fee. [RESULT] PASS", PASS),
    ("Feedback: The answer misses the fee. [RESULT] FAIL", FAIL),
    ("Feedback: The response is relevant. [RESULT] YES", UNSCORED),
    # chat judges that mix it all
    ("**Verdict: PASS** \u2705\n\nThe tone could be warmer, but it is correct.", PASS),
    ("VERDICT: FAIL. The style is fine but the refund window is wrong.", FAIL),
]


@pytest.mark.parametrize(("reply", "score"), DECORATED + STILL_UNREAD)
def test_a_decorated_verdict_is_read_and_two_verdicts_are_not(reply: str,
                                                              score: float | None) -> None:
    verdict = parse_verdict(reply, "pass_fail")
    assert verdict.score == score
    assert (verdict.error == "") == (score is not None)


@pytest.mark.parametrize(("reply", "score"), FIELD_CASES + MORE_REPLIES + TWO_VERDICTS
                         + PEER_REPLIES)
def test_pass_fail_replies(reply: str, score: float | None) -> None:
    verdict = parse_verdict(reply, "pass_fail")
    assert verdict.score == score
    assert (verdict.error == "") == (score is not None)


def test_field_case_counts() -> None:
    scores = [parse_verdict(reply).score for reply, _ in FIELD_CASES]
    assert scores.count(PASS) == 7 and scores.count(FAIL) == 2 and scores.count(None) == 3


#: 1-5 replies read the same way as before.
SCORES = [
    ("SCORE: 4", 0.75), ("Score: 5/5", 1.0), ("I'd rate it 3 out of 5.", 0.5),
    ("Rating: **2**\nThe tone is curt.", 0.25), ("1", 0.0), ('{"score": 4}', 0.75),
    ('```json\n{"rating": "5"}\n```', 1.0), ("Score: 7", None), ("Score: 0", None),
    ("very good", None), ('{"verdict": "pass"}', None), ("", None),
    ("The reply is polite and complete.\n\nSCORE: 4", 0.75), ("SCORE: 4\nSCORE: 4", 0.75),
    ("SCORE: **4**/5", 0.75), ("Clear and correct: 4/5\nSCORE: 4", 0.75),
    ("Score: 4.5", 0.875), ("Score: 4 (good)", 0.75),
    ("The answer lists 3 steps, 2 of them wrong.\nSCORE: 2", 0.25),
    ("Score: 8/10", None),
]
#: 1-5 replies in the peers' shapes (issue 31) and decorated ones.
PEER_SCORES: list[tuple[str, float | None]] = [
    ("Feedback: The answer is accurate but terse. [RESULT] 4", 0.75),  # Prometheus absolute
    ("[RESULT] 2", 0.25),
    ("The answer is clear. Rating: [[4]]", 0.75), ("[[5]]", 1.0),  # MT-Bench's brackets
    ("Rating: [[8]]", None),  # MT-Bench's own 1-10 scale
    ('{"score": 8, "reason": "Coherent."}', None),  # DeepEval G-Eval's 0-10 scale
    ('{"reason": "Accurate and complete.", "score": 4}', 0.75),
    ("<score>3</score>", 0.5), ("<rating>4</rating>\n<rating>2</rating>", None),
    ("SCORE: 4 \u2b50", 0.75), ("4\ufe0f\u20e3", 0.75),
    ('{"score": true}', None),
]
#: Field cases read wrongly before (each gave a score): a score on another scale, a reply that
#: restates the scale, two different scores. Each is a judge error, with this reason.
SCORE_FIELD_CASES = [
    ("On a scale of 1 to 5, I'd give it a 4.", "restates the scale"),
    ("Score 1-5: 4", "restates the scale"),
    ("Rating: 4 (1 = poor, 5 = excellent)", "restates the scale"),
    ("SCORE: 4\n\n(1 fails the rubric, 5 fully meets it)", "restates the scale"),
    ("Between 1 and 5, this is a 4. SCORE: 4", "restates the scale"),
    ("Rating: 4 on a five-point scale", "restates the scale"),
    ("Score: 4/10", "on another scale"),
    ("Score: 4 out of 10", "on another scale"),
    ("Score: 4 / 10 (decent)", "on another scale"),
    ("Score: 80%", "on another scale"),
    ("Score: 3\nOn reflection, score: 4", "different scores"),
    ("Score: 3/5 ... 4/5", "different scores"),
    ("Score: 2\n5", "different scores"),
    ('{"score": 4, "rating": 2}', "different verdicts or scores"),
    ('```json\n{"score": 4}\n```\nSCORE: 2', "another verdict"),
]


@pytest.mark.parametrize(("reply", "score"), SCORES + PEER_SCORES)
def test_one_to_five_scores(reply: str, score: float | None) -> None:
    assert parse_verdict(reply, "1-5").score == score


@pytest.mark.parametrize(("reply", "reason"), SCORE_FIELD_CASES)
def test_a_score_that_does_not_commit_to_the_scale_is_a_judge_error(reply: str,
                                                                    reason: str) -> None:
    verdict = parse_verdict(reply, "1-5")
    assert verdict.score is None and reason in verdict.error


def test_a_judge_error_is_counted_and_never_a_pass() -> None:
    replies = [text for text, _ in SCORE_FIELD_CASES] + ["SCORE: 5", "SCORE: 5"]
    errors = [v.error for v in map(lambda r: parse_verdict(r, "1-5"), replies) if v.error]
    result = combine(spec(len(replies), "1-5"), [1.0, 1.0], errors)
    assert result.errored and not result.passed
    assert result.details["judge_errors"] == len(SCORE_FIELD_CASES)


@pytest.mark.parametrize(("reply", "pick"), [
    ("WINNER: A", "A"), ("winner: b", "B"), ("WINNER: TIE", "tie"), ("**B**", "B"),
    ('{"winner": "A"}', "A"), ('{"winner": "Response B"}', "B"), ("A is clearer.\nA", "A"),
    ("Both are fine.", None), ("WINNER: A\nWINNER: B", None), ("", None), ('{"x": 1}', None),
    ("Response A is more thorough.\n[[A]]", "A"), ("[[B]]", "B"),  # MT-Bench's pairwise pick
])
def test_pairwise_picks(reply: str, pick: str | None) -> None:
    assert parse_pick(reply) == pick


@pytest.mark.parametrize(("first", "second", "score"), [
    ("A", "B", 1.0),      # head picked in both orders: a win
    ("B", "A", 0.0),      # base picked in both orders: a loss
    ("A", "A", 0.5),      # the judge always picks the first position: a tie, not a win
    ("B", "B", 0.5),
    ("tie", "tie", 0.5),
    ("A", "tie", 1.0),    # one win and one tie
    ("tie", "A", 0.0),
    ("A", None, None),    # one order errored: no score
])
def test_pairwise_cancels_position_bias(first: str, second: str | None,
                                        score: float | None) -> None:
    assert combine_picks(first, second) == score


def spec(n: int, scale: str = "pass_fail") -> JudgeSpec:
    return JudgeSpec("be right", Endpoint("openai/j"), scale, 0.75, n)  # type: ignore[arg-type]


def test_quorum_median_and_disagreement() -> None:
    result = combine(spec(3), [1.0, 0.0, 1.0], [])
    assert result.passed and result.score == 1.0
    assert result.details["disagreement"] == pytest.approx(1 / 3)
    assert result.details["votes"] == [1.0, 0.0, 1.0]
    split = combine(spec(3), [1.0, 0.0], ["no verdict"])
    assert not split.passed and not split.errored  # a tie fails (lower median)
    scores = combine(spec(3, "1-5"), [0.75, 1.0, 0.25], [])
    assert scores.passed and scores.score == 0.75
    assert scores.details["disagreement"] == 0.75


def test_quorum_without_a_majority_of_verdicts_is_a_judge_error() -> None:
    result = combine(spec(3), [1.0], ["empty reply", "no verdict (PASS or FAIL)"])
    assert result.errored and not result.passed
    assert result.message.startswith("judge error: empty reply")
    single = combine(spec(1), [], ["the JSON reply has no verdict or score"])
    assert single.errored and not single.passed


def test_the_prompt_version_changes_with_the_rubric() -> None:
    a = JudgeSpec("Mentions the refund.", Endpoint("openai/j"))
    b = JudgeSpec("Mentions the refund and the fee.", Endpoint("openai/j"))
    assert a.version != b.version and a.version.startswith("llm_judge/3:")
    assert a.version == JudgeSpec("Mentions the refund.", Endpoint("openai/other")).version
