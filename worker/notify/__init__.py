"""Notifications of default-branch regressions to the operator's webhooks (issue 35).

A push whose stored run regresses against the previous push's, by the previous push's gate
rules, is told to a Slack incoming webhook and/or a JSON webhook named in the worker's
environment: `channels` (the settings and secrets), `verdict` (the comparison, with the gate's
own code), `notices` (a push's opt-in, verdict and enqueued deliveries), `message` (the bodies)
and `deliver` (one signed POST, the package's only HTTP). The push job (worker/jobs/push.py)
decides and enqueues; the job of worker/jobs/notify.py delivers, retried, so a delivery never
holds a push or a gate up.

Face (``__all__``, worker/README.md's import rule 7): what other packages import of this
one, each name loaded from its module on first use.
"""

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:
    from worker.notify.channels import CTX_NOTIFY as CTX_NOTIFY
    from worker.notify.channels import NotifySettings as NotifySettings
    from worker.notify.deliver import JOB_DELIVER_NOTIFICATION as JOB_DELIVER_NOTIFICATION
    from worker.notify.deliver import NotifyPayload as NotifyPayload
    from worker.notify.deliver import notify_job_id as notify_job_id
    from worker.notify.deliver import post as post
    from worker.notify.deliver import request as request
    from worker.notify.notices import OpenTree as OpenTree
    from worker.notify.notices import PushedConfig as PushedConfig
    from worker.notify.notices import notify_push as notify_push
    from worker.notify.notices import opts_in as opts_in
    from worker.notify.verdict import PreviousRun as PreviousRun
    from worker.notify.verdict import previous_run as previous_run

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=[],
    submod_attrs={
        'channels': ['CTX_NOTIFY', 'NotifySettings'],
        'deliver': [
            'JOB_DELIVER_NOTIFICATION', 'NotifyPayload', 'notify_job_id', 'post', 'request',
        ],
        'notices': ['OpenTree', 'PushedConfig', 'notify_push', 'opts_in'],
        'verdict': ['PreviousRun', 'previous_run'],
    },
)
