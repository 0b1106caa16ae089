"""Compare base and head under the rules: paired statistics, outcomes.

Face (``__all__``, worker/README.md's import rule 7): what other packages import of this
one, each name loaded from its module on first use.
"""

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:
    from worker.evals.verdict.base_targets import no_answer as no_answer
    from worker.evals.verdict.causes import Attribution as Attribution
    from worker.evals.verdict.comparable import compare_comparable as compare_comparable
    from worker.evals.verdict.comparison import compare as compare
    from worker.evals.verdict.comparison import config_error_report as config_error_report
    from worker.evals.verdict.confirm import choose_confirmations as choose_confirmations
    from worker.evals.verdict.confirm import confirm_budget as confirm_budget
    from worker.evals.verdict.contract import contract_changes as contract_changes
    from worker.evals.verdict.contract import contract_components as contract_components
    from worker.evals.verdict.contract import gating_config as gating_config
    from worker.evals.verdict.contract import own_rules as own_rules
    from worker.evals.verdict.contract_verdict import at_head_lines as at_head_lines
    from worker.evals.verdict.contract_verdict import combine as combine
    from worker.evals.verdict.contract_verdict import contract_line as contract_line
    from worker.evals.verdict.flakiness import history_weights as history_weights
    from worker.evals.verdict.health import finish_report as finish_report
    from worker.evals.verdict.judge_trust import check_rules as check_rules
    from worker.evals.verdict.judge_trust import metric_name as metric_name
    from worker.evals.verdict.paired import has_example_values as has_example_values
    from worker.evals.verdict.paired import mean_over_repeats as mean_over_repeats
    from worker.evals.verdict.paired import pair_suite as pair_suite
    from worker.evals.verdict.power import DEFAULT_POWER as DEFAULT_POWER
    from worker.evals.verdict.power import mdd_binary as mdd_binary
    from worker.evals.verdict.power import min_significant_count as min_significant_count
    from worker.evals.verdict.power import n_needed_binary as n_needed_binary
    from worker.evals.verdict.reason_text import DECIDED_RULE as DECIDED_RULE
    from worker.evals.verdict.reason_text import UNDECIDED_RULE as UNDECIDED_RULE
    from worker.evals.verdict.reason_text import p_text as p_text
    from worker.evals.verdict.rules import merge_rules as merge_rules
    from worker.evals.verdict.sequential import DRAWS as DRAWS
    from worker.evals.verdict.sequential import Look as Look
    from worker.evals.verdict.sequential import sequential_look as sequential_look
    from worker.evals.verdict.signflip import SEED as SEED
    from worker.evals.verdict.signflip import FamilySuite as FamilySuite
    from worker.evals.verdict.signflip import History as History
    from worker.evals.verdict.signflip import example_history as example_history
    from worker.evals.verdict.signflip import family_arrays as family_arrays
    from worker.evals.verdict.stats import DEFAULT_RESAMPLES as DEFAULT_RESAMPLES
    from worker.evals.verdict.stats import ZERO_METHOD as ZERO_METHOD
    from worker.evals.verdict.stats import bootstrap_means as bootstrap_means
    from worker.evals.verdict.stats import mcnemar_drop as mcnemar_drop
    from worker.evals.verdict.stats import mcnemar_p as mcnemar_p
    from worker.evals.verdict.stats import percentile_interval as percentile_interval
    from worker.evals.verdict.unanswered import count_as_failed as count_as_failed
    from worker.evals.verdict.unanswered import note as note

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=[],
    submod_attrs={
        'base_targets': ['no_answer'],
        'causes': ['Attribution'],
        'comparable': ['compare_comparable'],
        'comparison': ['compare', 'config_error_report'],
        'confirm': ['choose_confirmations', 'confirm_budget'],
        'contract': ['contract_changes', 'contract_components', 'gating_config', 'own_rules'],
        'contract_verdict': ['at_head_lines', 'combine', 'contract_line'],
        'flakiness': ['history_weights'],
        'health': ['finish_report'],
        'judge_trust': ['check_rules', 'metric_name'],
        'paired': ['has_example_values', 'mean_over_repeats', 'pair_suite'],
        'power': ['DEFAULT_POWER', 'mdd_binary', 'min_significant_count', 'n_needed_binary'],
        'reason_text': ['DECIDED_RULE', 'UNDECIDED_RULE', 'p_text'],
        'rules': ['merge_rules'],
        'sequential': ['DRAWS', 'Look', 'sequential_look'],
        'signflip': ['FamilySuite', 'History', 'SEED', 'example_history', 'family_arrays'],
        'stats': [
            'DEFAULT_RESAMPLES', 'ZERO_METHOD', 'bootstrap_means', 'mcnemar_drop', 'mcnemar_p',
            'percentile_interval',
        ],
        'unanswered': ['count_as_failed', 'note'],
    },
)
