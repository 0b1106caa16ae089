"""The assertion types added to the basic ones of worker/evals/score/assertions.py, and how each
runs.

- structured (worker/evals/score/structured.py): ``json_valid``, ``json_schema``, ``starts_with``,
  ``length``, ``is_one_of``, ``classification``, ``latency``, ``cost``: pure, per example.
- ``llm_judge`` (worker/evals/score/judges.py) and ``similar`` (worker/evals/score/similar.py): a
  model call per example.
- ``python`` (worker/evals/score/custom.py): one batch per suite and assertion.
- ``pairwise`` (worker/evals/score/pairwise.py): once both base and head ran; a suite-level
  assertion only, it scores ``win_rate`` and no example's pass/fail.
- retrieval (worker/evals/score/retrieval.py): ``recall_at_k``, ``precision_at_k``,
  ``hit_at_k``, ``mrr``, ``ndcg_at_k``: pure, per example, on the target's ``retrieved_ids``.
"""

from __future__ import annotations

from worker.errors import ConfigError
from worker.evals.score.custom import validate_python
from worker.evals.score.judges import validate_judge
from worker.evals.score.retrieval import RETRIEVAL_TYPES, validate_retrieval
from worker.evals.score.similar import validate_similar
from worker.evals.score.structured import STRUCTURED_TYPES
from worker.evals.score.structured import validate as validate_structured
from worker.evals.types import AssertionSpec

MODEL_TYPES = ("llm_judge", "similar")
BATCH_TYPES = ("python",)
RUN_TYPES = ("pairwise",)
#: Every added type, in the order the config reference lists them.
EXTRA_TYPES: tuple[str, ...] = (*STRUCTURED_TYPES, *MODEL_TYPES, *BATCH_TYPES, *RUN_TYPES,
                                *RETRIEVAL_TYPES)


def validate_extra(spec: AssertionSpec, path: str) -> None:
    """Check an added assertion type's options at config time.

    Raises:
        ConfigError: in ``path`` at ``spec.line``, naming the assertion and the problem.
    """

    def fail(message: str) -> ConfigError:
        return ConfigError(path, spec.line, f"assertion `{spec.type}`: {message}")

    if spec.type in STRUCTURED_TYPES:
        validate_structured(spec, fail)
    elif spec.type == "llm_judge":
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
    elif spec.type in RETRIEVAL_TYPES:
        validate_retrieval(spec, fail)
