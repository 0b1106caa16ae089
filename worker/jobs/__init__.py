"""arq entry points: wiring only; no job module imports another.

Face (``__all__``, worker/README.md's import rule 7): what other packages import of this
one, each name loaded from its module on first use.
"""

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:
    from worker.jobs.calibrate import calibration_cron_jobs as calibration_cron_jobs
    from worker.jobs.events import EVENT_JOBS as EVENT_JOBS
    from worker.jobs.events import installation_changed as installation_changed
    from worker.jobs.notify import deliver_notification as deliver_notification
    from worker.jobs.pull_request import Services as Services
    from worker.jobs.pull_request import approve_pull_request as approve_pull_request
    from worker.jobs.pull_request import gate_pull_request as gate_pull_request
    from worker.jobs.pull_request import rerun_from_comment as rerun_from_comment
    from worker.jobs.push import store_baseline as store_baseline
    from worker.jobs.shard import answer_shard as answer_shard

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=[],
    submod_attrs={
        'calibrate': ['calibration_cron_jobs'],
        'events': ['EVENT_JOBS', 'installation_changed'],
        'notify': ['deliver_notification'],
        'pull_request': [
            'Services', 'approve_pull_request', 'gate_pull_request', 'rerun_from_comment',
        ],
        'push': ['store_baseline'],
        'shard': ['answer_shard'],
    },
)
