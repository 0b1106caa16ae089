"""The assertion types added to the basic ones of worker/evals/score/assertions.py, and how each
runs.

- structured (worker/evals/score/structured.py): ``json_valid``, ``json_schema``, ``starts_with``,
  ``length``, ``is_one_of``, ``classification``, ``latency``, ``cost``: pure, per example.
- safety (worker/evals/score/safety.py): ``pii``, ``refusal``: pure, per example; ``harmful``:
  a judge with a built-in rubric.
- ``llm_judge`` (worker/evals/score/judges.py) and ``similar`` (worker/evals/score/similar.py): a
  model call per example; ``composite`` (worker/evals/score/composite.py): one per criterion.
- ``python`` (worker/evals/score/custom.py): one batch per suite and assertion.
- ``pairwise`` (worker/evals/score/pairwise.py): once both base and head ran; a suite-level
  assertion only, it scores ``win_rate`` and no example's pass/fail.
- retrieval (worker/evals/score/retrieval.py): ``recall_at_k``, ``precision_at_k``,
  ``hit_at_k``, ``mrr``, ``ndcg_at_k``: pure, per example, on the target's ``retrieved_ids``.
- agents (worker/evals/score/agent.py): ``tools_called``, ``tools_not_called``,
  ``max_tool_calls``, ``tool_arguments``, ``trajectory``, ``max_steps``: pure, on the trace;
  ``trajectory_judge`` (worker/evals/score/trajectory_judge.py): a judge call per example.
"""

from __future__ import annotations

from collections.abc import Callable

from worker.errors import ConfigError
from worker.evals.score.agent import AGENT_TYPES
from worker.evals.score.agent import validate as validate_agent
from worker.evals.score.composite import validate_composite
from worker.evals.score.custom_spec import validate_python
from worker.evals.score.judges import Fail, validate_judge
from worker.evals.score.retrieval import RETRIEVAL_TYPES, validate_retrieval
from worker.evals.score.safety import SAFETY_TYPES, validate_safety
from worker.evals.score.similar import validate_similar
from worker.evals.score.structured import STRUCTURED_TYPES
from worker.evals.score.structured import validate as validate_structured
from worker.evals.types import AssertionSpec

MODEL_TYPES = ("llm_judge", "similar", "harmful", "composite")
BATCH_TYPES = ("python",)
RUN_TYPES = ("pairwise",)
#: Every added type, in the order the config reference lists them.
AGENT_JUDGE_TYPES = ("trajectory_judge",)
EXTRA_TYPES: tuple[str, ...] = (*STRUCTURED_TYPES, *SAFETY_TYPES, *MODEL_TYPES, *BATCH_TYPES,
                                *RUN_TYPES, *RETRIEVAL_TYPES, *AGENT_TYPES, *AGENT_JUDGE_TYPES)


def validate_extra(spec: AssertionSpec, path: str) -> None:
    """Check an added assertion type's options at config time.

    Raises:
        ConfigError: in ``path`` at ``spec.line``, naming the assertion and the problem.
    """

    def fail(message: str) -> ConfigError:
        return ConfigError(path, spec.line, f"assertion `{spec.type}`: {message}")

    validator = _VALIDATORS.get(spec.type)
    if validator is not None:
        validator(spec, fail)


def _validate_pairwise(spec: AssertionSpec, fail: Fail) -> None:
    validate_judge(spec, fail)
    if spec.params.get("scale", "pass_fail") != "pass_fail" or "n" in spec.params \
            or "threshold" in spec.params:
        raise fail("`pairwise` picks a winner: it takes no `scale`, `n` or `threshold`")


#: The option check of each added assertion type (types not listed take no options).
_VALIDATORS: dict[str, Callable[[AssertionSpec, Fail], None]] = {
    **dict.fromkeys(STRUCTURED_TYPES, validate_structured),
    "llm_judge": validate_judge,
    "pairwise": _validate_pairwise,
    "similar": validate_similar,
    "python": validate_python,
    **dict.fromkeys((*SAFETY_TYPES, "harmful"), validate_safety),
    "composite": validate_composite,
    **dict.fromkeys(RETRIEVAL_TYPES, validate_retrieval),
    **dict.fromkeys(AGENT_TYPES, validate_agent),
    "trajectory_judge": validate_judge,
}
