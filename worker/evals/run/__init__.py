"""Run the targets on every example: commands, batches, model targets.

Face (``__all__``, worker/README.md's import rule 7): what other packages import of this
one, each name loaded from its module on first use.
"""

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:
    from worker.evals.run import fingerprint as fingerprint
    from worker.evals.run import runner as runner
    from worker.evals.run.engine import run_config as run_config
    from worker.evals.run.engine import run_configs as run_configs
    from worker.evals.run.estimate import Judging as Judging
    from worker.evals.run.estimate import ModelUse as ModelUse
    from worker.evals.run.estimate import estimate_configs as estimate_configs
    from worker.evals.run.fingerprint import DESCRIPTIONS as DESCRIPTIONS
    from worker.evals.run.fingerprint import changed as changed
    from worker.evals.run.fingerprint import describe as describe
    from worker.evals.run.fingerprint import digest as digest
    from worker.evals.run.fingerprint import file_digest as file_digest
    from worker.evals.run.fingerprint import suite_fingerprint as suite_fingerprint
    from worker.evals.run.judge_calibration import calibrate_suite as calibrate_suite
    from worker.evals.run.judge_calibration import drift as drift
    from worker.evals.run.judge_calibration import identity as identity
    from worker.evals.run.judge_calibration import load_snapshot as load_snapshot
    from worker.evals.run.judge_calibration import planned_judgings as planned_judgings
    from worker.evals.run.judge_calibration import suite_criteria as suite_criteria
    from worker.evals.run.judge_calibration import write_snapshot as write_snapshot
    from worker.evals.run.judge_calibration_types import (
        CriterionCalibration as CriterionCalibration,
    )
    from worker.evals.run.judge_calibration_types import JudgeCalibration as JudgeCalibration
    from worker.evals.run.runner import Looks as Looks
    from worker.evals.run.runner import RunState as RunState
    from worker.evals.run.runner import describe_estimate as describe_estimate
    from worker.evals.run.runner import difference as difference
    from worker.evals.run.runner import judge_pairs as judge_pairs
    from worker.evals.run.runner import look_key as look_key
    from worker.evals.run.runner import run_suites as run_suites
    from worker.evals.run.runner import unpriced_error as unpriced_error
    from worker.evals.run.views import TargetViews as TargetViews
    from worker.evals.run.views import runs_commands as runs_commands

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=['fingerprint', 'runner'],
    submod_attrs={
        'engine': ['run_config', 'run_configs'],
        'estimate': ['Judging', 'ModelUse', 'estimate_configs'],
        'fingerprint': [
            'DESCRIPTIONS', 'changed', 'describe', 'digest', 'file_digest', 'suite_fingerprint',
        ],
        'judge_calibration': [
            'calibrate_suite', 'drift', 'identity', 'load_snapshot', 'planned_judgings',
            'suite_criteria', 'write_snapshot',
        ],
        'judge_calibration_types': ['CriterionCalibration', 'JudgeCalibration'],
        'runner': [
            'Looks', 'RunState', 'describe_estimate', 'difference', 'judge_pairs', 'look_key',
            'run_suites', 'unpriced_error',
        ],
        'views': ['TargetViews', 'runs_commands'],
    },
)
