"""One gate run on GitHub: check runs, trust, supersede, the sticky comment.

Face (``__all__``, worker/README.md's import rule 7): what other packages import of this
one, each name loaded from its module on first use.
"""

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:
    from worker.gate import accept as accept
    from worker.gate import commands as commands
    from worker.gate import installs as installs
    from worker.gate import shards as shards
    from worker.gate import untrusted as untrusted
    from worker.gate.calibration import RESULT_TTL_S as RESULT_TTL_S
    from worker.gate.calibration import CalibrationSchedule as CalibrationSchedule
    from worker.gate.calibration import remember_base as remember_base
    from worker.gate.calibration import result_key as result_key
    from worker.gate.calibration import target_key as target_key
    from worker.gate.check_run import retry_later as retry_later
    from worker.gate.installs import quiet_when_uninstalled as quiet_when_uninstalled
    from worker.gate.reconcile import reconcile_interval_s as reconcile_interval_s
    from worker.gate.reconcile import start_reconciling as start_reconciling
    from worker.gate.reconcile import stop_reconciling as stop_reconciling
    from worker.gate.request import GateRequest as GateRequest
    from worker.gate.run import run_gate as run_gate
    from worker.gate.services import Services as Services
    from worker.gate.sweeper import sweeper_cron_jobs as sweeper_cron_jobs
    from worker.gate.trust import WRITE_PERMISSIONS as WRITE_PERMISSIONS

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=['accept', 'commands', 'installs', 'shards', 'untrusted'],
    submod_attrs={
        'calibration': [
            'CalibrationSchedule', 'RESULT_TTL_S', 'remember_base', 'result_key', 'target_key',
        ],
        'check_run': ['retry_later'],
        'installs': ['quiet_when_uninstalled'],
        'reconcile': ['reconcile_interval_s', 'start_reconciling', 'stop_reconciling'],
        'request': ['GateRequest'],
        'run': ['run_gate'],
        'services': ['Services'],
        'sweeper': ['sweeper_cron_jobs'],
        'trust': ['WRITE_PERMISSIONS'],
    },
)
