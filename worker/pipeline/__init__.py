"""Gate two checked-out trees: configs, on_paths, calibration; no GitHub.

Face (``__all__``, worker/README.md's import rule 7): what other packages import of this
one, each name loaded from its module on first use.
"""

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:
    from worker.pipeline.calibrate import calibrate_tree as calibrate_tree
    from worker.pipeline.calibrate import cmd_calibrate as cmd_calibrate
    from worker.pipeline.calibrate import render_json as render_json
    from worker.pipeline.calibration_history import history_of as history_of
    from worker.pipeline.config_file import base_mode as base_mode
    from worker.pipeline.config_file import read_config as read_config
    from worker.pipeline.migrate_plan import MigrationRequest as MigrationRequest
    from worker.pipeline.migrate_plan import OverBudget as OverBudget
    from worker.pipeline.migration import Migration as Migration
    from worker.pipeline.migration import migrate as migrate
    from worker.pipeline.multi import error_in_repository as error_in_repository
    from worker.pipeline.multi import folder_config_error as folder_config_error
    from worker.pipeline.multi import gate_plan as gate_plan
    from worker.pipeline.on_paths import restrict as restrict
    from worker.pipeline.on_paths import select_suites as select_suites
    from worker.pipeline.overrides import apply_overrides as apply_overrides
    from worker.pipeline.overrides import check_suites as check_suites
    from worker.pipeline.overrides import no_such_suite as no_such_suite
    from worker.pipeline.overrides import suite_named as suite_named
    from worker.pipeline.plan import CONFLICT_UNDECIDED as CONFLICT_UNDECIDED
    from worker.pipeline.plan import MERGED_REASON as MERGED_REASON
    from worker.pipeline.plan import ConfigPlan as ConfigPlan
    from worker.pipeline.plan import Plan as Plan
    from worker.pipeline.plan import baseline_namespace as baseline_namespace
    from worker.pipeline.plan import conflict_note as conflict_note
    from worker.pipeline.plan import folder_plan as folder_plan
    from worker.pipeline.plan import folder_root as folder_root
    from worker.pipeline.plan import merged_note as merged_note
    from worker.pipeline.plan import nothing_to_gate as nothing_to_gate
    from worker.pipeline.plan import plan_configs as plan_configs
    from worker.pipeline.plan import tip_reason as tip_reason
    from worker.pipeline.plan import unconfigured_tree as unconfigured_tree
    from worker.pipeline.preflight import endpoints_of as endpoints_of
    from worker.pipeline.progress import GateProgress as GateProgress
    from worker.pipeline.progress import SuiteLine as SuiteLine
    from worker.pipeline.progress import duration as duration
    from worker.pipeline.report_values import NO_CONFIG_HEADLINE as NO_CONFIG_HEADLINE
    from worker.pipeline.report_values import SEVERITY as SEVERITY
    from worker.pipeline.report_values import CheckMode as CheckMode
    from worker.pipeline.report_values import ConfigReport as ConfigReport
    from worker.pipeline.report_values import MultiReport as MultiReport
    from worker.pipeline.report_values import unconfigured_report as unconfigured_report
    from worker.pipeline.trees import BaseRun as BaseRun
    from worker.pipeline.trees import BaseRunner as BaseRunner
    from worker.pipeline.trees import gate_trees as gate_trees
    from worker.pipeline.trees import run_base_now as run_base_now
    from worker.pipeline.trees import verdict_without_base as verdict_without_base

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=[],
    submod_attrs={
        'calibrate': ['calibrate_tree', 'cmd_calibrate', 'render_json'],
        'calibration_history': ['history_of'],
        'config_file': ['base_mode', 'read_config'],
        'migrate_plan': ['MigrationRequest', 'OverBudget'],
        'migration': ['Migration', 'migrate'],
        'multi': ['error_in_repository', 'folder_config_error', 'gate_plan'],
        'on_paths': ['restrict', 'select_suites'],
        'overrides': ['apply_overrides', 'check_suites', 'no_such_suite', 'suite_named'],
        'plan': [
            'CONFLICT_UNDECIDED', 'ConfigPlan', 'MERGED_REASON', 'Plan', 'baseline_namespace',
            'conflict_note', 'folder_plan', 'folder_root', 'merged_note', 'nothing_to_gate',
            'plan_configs', 'tip_reason', 'unconfigured_tree',
        ],
        'preflight': ['endpoints_of'],
        'progress': ['GateProgress', 'SuiteLine', 'duration'],
        'report_values': [
            'CheckMode', 'ConfigReport', 'MultiReport', 'NO_CONFIG_HEADLINE', 'SEVERITY',
            'unconfigured_report',
        ],
        'trees': ['BaseRun', 'BaseRunner', 'gate_trees', 'run_base_now', 'verdict_without_base'],
    },
)
