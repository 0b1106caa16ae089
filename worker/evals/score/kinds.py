"""The assertion types added to the basic ones of worker/evals/score/assertions.py, and how each
runs.

- structured (worker/evals/score/structured.py): ``json_valid``, ``json_schema``, ``starts_with``,
  ``length``, ``is_one_of``, ``classification``, ``latency``, ``cost``: pure, per example.
- ``llm_judge`` (worker/evals/score/judges.py) and ``similar`` (worker/evals/score/similar.py): a
  model call per example.
- ``python`` (worker/evals/score/custom.py): one batch per suite and assertion.
- ``pairwise`` (worker/evals/score/pairwise.py): once both base and head ran; a suite-level
  assertion only, it scores ``win_rate`` and no example's pass/fail.
- agents (worker/evals/score/agent.py): ``tools_called``, ``tools_not_called``,
  ``max_tool_calls``, ``tool_arguments``, ``trajectory``, ``max_steps``: pure, on the trace;
  ``trajectory_judge`` (worker/evals/score/trajectory_judge.py): a judge call per example.
"""

from __future__ import annotations

from worker.errors import ConfigError
from worker.evals.score.agent import AGENT_TYPES
from worker.evals.score.agent import validate as validate_agent
from worker.evals.score.custom import validate_python
from worker.evals.score.judges import validate_judge
from worker.evals.score.similar import validate_similar
from worker.evals.score.structured import STRUCTURED_TYPES
from worker.evals.score.structured import validate as validate_structured
from worker.evals.types import AssertionSpec

MODEL_TYPES = ("llm_judge", "similar")
BATCH_TYPES = ("python",)
RUN_TYPES = ("pairwise",)
#: Every added type, in the order the config reference lists them.
AGENT_JUDGE_TYPES = ("trajectory_judge",)
EXTRA_TYPES: tuple[str, ...] = (*STRUCTURED_TYPES, *MODEL_TYPES, *BATCH_TYPES, *RUN_TYPES,
                                *AGENT_TYPES, *AGENT_JUDGE_TYPES)


def validate_extra(spec: AssertionSpec, path: str) -> None:
    """Check an added assertion type's options at config time.

    Raises:
        ConfigError: in ``path`` at ``spec.line``, naming the assertion and the problem.
    """

    def fail(message: str) -> ConfigError:
        return ConfigError(path, spec.line, f"assertion `{spec.type}`: {message}")

    if spec.type in STRUCTURED_TYPES:
        validate_structured(spec, fail)
    elif spec.type in ("llm_judge", *AGENT_JUDGE_TYPES):
        validate_judge(spec, fail)
    elif spec.type == "pairwise":
        validate_judge(spec, fail)
        if spec.params.get("scale", "pass_fail") != "pass_fail" or "n" in spec.params \
                or "threshold" in spec.params:
            raise fail("`pairwise` picks a winner: it takes no `scale`, `n` or `threshold`")
    elif spec.type == "similar":
        validate_similar(spec, fail)
    elif spec.type == "python":
        validate_python(spec, fail)
    elif spec.type in AGENT_TYPES:
        validate_agent(spec, fail)
