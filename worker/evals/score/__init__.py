"""Score outputs: assertions, judges and metrics.

Face (``__all__``, worker/README.md's import rule 7): what other packages import of this
one, each name loaded from its module on first use.
"""

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:
    from worker.evals.score import agreement as agreement
    from worker.evals.score.agent import check_tool_names as check_tool_names
    from worker.evals.score.agreement import Estimate as Estimate
    from worker.evals.score.assertions import KNOWN_ASSERTIONS as KNOWN_ASSERTIONS
    from worker.evals.score.assertions import NORMALIZED_TYPES as NORMALIZED_TYPES
    from worker.evals.score.assertions import TEXT_VERSION as TEXT_VERSION
    from worker.evals.score.assertions import as_text as as_text
    from worker.evals.score.assertions import validate_spec as validate_spec
    from worker.evals.score.composite import criterion_specs as criterion_specs
    from worker.evals.score.consistency import Answer as Answer
    from worker.evals.score.consistency import Question as Question
    from worker.evals.score.consistency import car_curve as car_curve
    from worker.evals.score.consistency import consistency_metrics as consistency_metrics
    from worker.evals.score.consistency import intervals as intervals
    from worker.evals.score.consistency import is_consistency as is_consistency
    from worker.evals.score.consistency import questions as questions
    from worker.evals.score.custom_metrics import apply_metrics as apply_metrics
    from worker.evals.score.custom_spec import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
    from worker.evals.score.direction import LOWER_IS_BETTER as LOWER_IS_BETTER
    from worker.evals.score.direction import lower_is_better as lower_is_better
    from worker.evals.score.example_values import example_value as example_value
    from worker.evals.score.example_values import has_example_values as has_example_values
    from worker.evals.score.example_values import values_array as values_array
    from worker.evals.score.judge_parse import writes_verdict as writes_verdict
    from worker.evals.score.judges import JUDGE_TEMPLATE_VERSION as JUDGE_TEMPLATE_VERSION
    from worker.evals.score.judges import JUDGE_TYPES as JUDGE_TYPES
    from worker.evals.score.judges import JudgeSpec as JudgeSpec
    from worker.evals.score.judges import judge_messages as judge_messages
    from worker.evals.score.judges import judge_spec as judge_spec
    from worker.evals.score.judges import run_judge as run_judge
    from worker.evals.score.metrics import KNOWN_METRICS as KNOWN_METRICS
    from worker.evals.score.metrics import is_known_metric as is_known_metric
    from worker.evals.score.metrics import suite_metrics as suite_metrics
    from worker.evals.score.metrics_llm import NEEDS_BASE as NEEDS_BASE
    from worker.evals.score.outputs import OutputError as OutputError
    from worker.evals.score.outputs import parse_output_document as parse_output_document
    from worker.evals.score.pairwise import PAIRWISE_TEMPLATE_VERSION as PAIRWISE_TEMPLATE_VERSION
    from worker.evals.score.pairwise import add_pairwise as add_pairwise
    from worker.evals.score.rag_judges import CRITERIA as CRITERIA
    from worker.evals.score.rag_judges import missing_input as missing_input
    from worker.evals.score.retrieval import parse_relevant as parse_relevant
    from worker.evals.score.retrieval import relevant_id_problem as relevant_id_problem
    from worker.evals.score.safety import is_refusal as is_refusal
    from worker.evals.score.scoring import Item as Item
    from worker.evals.score.scoring import score_items as score_items
    from worker.evals.score.scoring import specs_of as specs_of
    from worker.evals.score.similar import embed_texts as embed_texts
    from worker.evals.score.structured import check_schema as check_schema
    from worker.evals.score.traces import arguments_of as arguments_of
    from worker.evals.score.trajectory_judge import (
        TRAJECTORY_TEMPLATE_VERSION as TRAJECTORY_TEMPLATE_VERSION,
    )

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=['agreement'],
    submod_attrs={
        'agent': ['check_tool_names'],
        'agreement': ['Estimate'],
        'assertions': [
            'KNOWN_ASSERTIONS', 'NORMALIZED_TYPES', 'TEXT_VERSION', 'as_text', 'validate_spec',
        ],
        'composite': ['criterion_specs'],
        'consistency': [
            'Answer', 'Question', 'car_curve', 'consistency_metrics', 'intervals', 'is_consistency',
            'questions',
        ],
        'custom_metrics': ['apply_metrics'],
        'custom_spec': ['ENTRY_POINT_GROUP'],
        'direction': ['LOWER_IS_BETTER', 'lower_is_better'],
        'example_values': ['example_value', 'has_example_values', 'values_array'],
        'judge_parse': ['writes_verdict'],
        'judges': [
            'JUDGE_TEMPLATE_VERSION', 'JUDGE_TYPES', 'JudgeSpec', 'judge_messages', 'judge_spec',
            'run_judge',
        ],
        'metrics': ['KNOWN_METRICS', 'is_known_metric', 'suite_metrics'],
        'metrics_llm': ['NEEDS_BASE'],
        'outputs': ['OutputError', 'parse_output_document'],
        'pairwise': ['PAIRWISE_TEMPLATE_VERSION', 'add_pairwise'],
        'rag_judges': ['CRITERIA', 'missing_input'],
        'retrieval': ['parse_relevant', 'relevant_id_problem'],
        'safety': ['is_refusal'],
        'scoring': ['Item', 'score_items', 'specs_of'],
        'similar': ['embed_texts'],
        'structured': ['check_schema'],
        'traces': ['arguments_of'],
        'trajectory_judge': ['TRAJECTORY_TEMPLATE_VERSION'],
    },
)
