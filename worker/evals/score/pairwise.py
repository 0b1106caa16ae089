"""``pairwise``: a judge compares head's and base's answer to each example; metric ``win_rate``.

Runs once both runs are in, for each suite with a suite-level ``pairwise`` assertion (options as
``llm_judge``: ``rubric`` or ``criteria``, ``include_expected``, model fields). For every example
answered at both base and head (first draw), the judge sees the two answers twice, head first and
then base first, so that a judge that prefers a position cannot favour one side (position bias:
Zheng et al., "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", 2023). Each order gives
head 1 (its answer picked), 0.5 (tie) or 0 points; over both orders head wins (score 1) with
more than 1 point, loses (0) with less, and ties (0.5) otherwise. A failed call or a reply
without a pick makes that example a judge error (no score). ``win_rate`` is the mean score of
the judged examples: above 0.5 head is preferred.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

from worker.errors import ConfigError
from worker.evals.llm import ModelCaller
from worker.evals.llm_types import PairwiseResult, RunUsage
from worker.evals.score.judge_parse import parse_pick
from worker.evals.score.judge_text import untrusted
from worker.evals.score.judges import SYSTEM, JudgeSpec, judge_spec
from worker.evals.types import (
    CONFIG_FILENAME,
    AssertionSpec,
    Config,
    ExampleResult,
    RunResult,
    SuiteResult,
)

#: Bumped whenever the pairwise prompt template below changes.
PAIRWISE_TEMPLATE_VERSION = "pairwise/2"
INSTRUCTION = ("Explain briefly if you need to, then end your reply with one last line that is "
               "exactly `WINNER: A`, `WINNER: B` or `WINNER: TIE`.")


def _text(value: Any) -> str:
    return untrusted(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def pairwise_messages(js: JudgeSpec, example: ExampleResult, first: Any,
                      second: Any) -> list[dict[str, str]]:
    """Return the judge's messages comparing answer A (``first``) and answer B (``second``)."""
    parts = [f"Rubric:\n{js.rubric}", f"Input:\n<input>\n{_text(example.input)}\n</input>"]
    if js.include_expected and example.expected is not None:
        parts.append(f"Reference answer:\n<reference>\n{_text(example.expected)}\n</reference>")
    parts += [f"Answer A:\n<answer_a>\n{_text(first)}\n</answer_a>",
              f"Answer B:\n<answer_b>\n{_text(second)}\n</answer_b>",
              "Which answer meets the rubric better?", INSTRUCTION]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def head_points(pick: str, head_is_a: bool) -> float:
    """Return head's points for one order: 1 when its answer is picked, 0.5 for a tie."""
    if pick == "tie":
        return 0.5
    return 1.0 if (pick == "A") == head_is_a else 0.0


def combine_picks(first: str | None, second: str | None) -> float | None:
    """Combine the picks of the head-first and base-first orders into head's score (pure)."""
    if first is None or second is None:
        return None
    points = head_points(first, True) + head_points(second, False)
    return 1.0 if points > 1 else 0.0 if points < 1 else 0.5


async def judge_pair(js: JudgeSpec, caller: ModelCaller, head: ExampleResult,
                     base: ExampleResult) -> tuple[PairwiseResult, RunUsage]:
    """Judge one example's head and base answers in both orders."""
    orders = ((head.output, base.output), (base.output, head.output))
    outcomes = await asyncio.gather(*(
        caller.chat(js.endpoint, pairwise_messages(js, head, a, b),
                    kind="pairwise", version=js.version) for a, b in orders))
    spend = sum((o.spend for o in outcomes), RunUsage())
    picks = [parse_pick(o.answer.text) if o.answer is not None else None for o in outcomes]
    score = combine_picks(picks[0], picks[1])
    shown = tuple(p if p is not None else "error" for p in picks)
    if score is None:
        errors = [o.error or "no pick (A, B or tie) in the reply" for o, p in
                  zip(outcomes, picks, strict=True) if p is None]
        return PairwiseResult(head.id, None, shown, "; ".join(errors)[:500]), spend
    return PairwiseResult(head.id, score, shown), spend


async def add_pairwise(config: Config, head: RunResult, base: RunResult | None,
                       caller: ModelCaller) -> RunResult:
    """Judge head against base for every suite with a ``pairwise`` assertion.

    Args:
        config: the head config.
        head, base: the two runs (nothing happens without a base).
        caller: the call path of this step.

    Returns:
        ``head`` with ``pairwise`` results, ``win_rate`` and the judge spend added per suite
        and to the run.

    Raises:
        ConfigError: a ``pairwise`` assertion without a judge model.
    """
    if base is None:
        return head
    suites = dict(head.suites)
    spent = RunUsage()
    for suite in config.suites:
        spec = next((s for s in suite.assertions if s.type == "pairwise"), None)
        if spec is None or suite.name not in suites or suite.name not in base.suites:
            continue
        suites[suite.name], used = await _suite(spec, config, suites[suite.name],
                                                base.suites[suite.name], caller)
        spent = spent + used
    return replace(head, suites=suites, spend=head.spend + spent)


async def _suite(spec: AssertionSpec, config: Config, head: SuiteResult, base: SuiteResult,
                 caller: ModelCaller) -> tuple[SuiteResult, RunUsage]:
    def fail(message: str) -> ConfigError:
        return ConfigError(CONFIG_FILENAME, spec.line, f"assertion `pairwise`: {message}")

    js = replace(judge_spec(spec, config.settings.judge, fail), kind=PAIRWISE_TEMPLATE_VERSION)
    base_by_id = {r.id: r for r in base.examples if r.repeat == 0 and not r.errored}
    pairs = [(r, base_by_id[r.id]) for r in head.examples
             if r.repeat == 0 and not r.errored and r.id in base_by_id]
    judged = await asyncio.gather(*(judge_pair(js, caller, h, b) for h, b in pairs))
    results = tuple(result for result, _ in judged)
    spend = sum((used for _, used in judged), RunUsage())
    scores = [r.score for r in results if r.score is not None]
    metrics = dict(head.metrics)
    if scores:
        metrics["win_rate"] = sum(scores) / len(scores)
    return replace(head, pairwise=results, metrics=metrics, spend=head.spend + spend), spend
