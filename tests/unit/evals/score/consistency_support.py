"""Build a consistency suite's example results from answers, without running a target."""

from __future__ import annotations

from collections.abc import Sequence

from worker.evals.config.consistency import expand
from worker.evals.config.mc_dataset import MCOption, MCQuestion
from worker.evals.score import mc_answer
from worker.evals.score.consistency import annotate
from worker.evals.types import (
    AssertionResult,
    ConsistencySpec,
    Example,
    ExampleResult,
    PerturbationSpec,
)

SPEC = ConsistencySpec((PerturbationSpec("option_reorder", 3),), seed=1)


def question(qid: str, right: str = "A", labels: str = "ABCD") -> MCQuestion:
    """A question whose option X has the text ``opt-X``; ``right`` is correct."""
    return MCQuestion(qid, f"Question {qid}?", tuple(MCOption(x, f"opt-{x}", x == right)
                                                    for x in labels), 1)


def scored(example: Example, output: str | None, *, errored: bool = False,
           unscored: bool = False) -> ExampleResult:
    """The result of ``output`` for ``example``, scored by ``mc_answer`` as the engine does."""
    passed, message, details = mc_answer.check({}, output, example)
    assertion = AssertionResult("mc_answer", passed and not errored, float(passed), message,
                                details=details)
    return ExampleResult(example.id, example.line, passed and not errored, errored, output,
                         example.expected, assertions=(assertion,), metadata=example.metadata,
                         unscored=unscored)


def results_for(answers: dict[str, Sequence[str | None]],
                spec: ConsistencySpec = SPEC) -> list[ExampleResult]:
    """Results of questions (right option A) whose variants name the given dataset options
    (None: an unparseable reply), in variant order; the answer is written as the label the
    variant shows that option under."""
    out = []
    for qid, options in answers.items():
        examples = expand((question(qid),), spec, "q.jsonl")
        assert len(examples) == len(options), (qid, len(examples))
        for example, option in zip(examples, options, strict=True):
            shown = {o[1]: o[0] for o in example.metadata["consistency"]["options"]}
            text = "I cannot tell." if option is None else f"Answer: {shown[option]}"
            out.append(scored(example, text))
    return annotate(out)
