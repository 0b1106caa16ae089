"""Stored base results: the store, the keys, reuse per suite.

Face (``__all__``, worker/README.md's import rule 7): what other packages import of this
one, each name loaded from its module on first use.
"""

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:
    from worker.baselines.keys import BaselineKey as BaselineKey
    from worker.baselines.local import GitRefStore as GitRefStore
    from worker.baselines.local import every_record as every_record
    from worker.baselines.local import open_store as open_store
    from worker.baselines.names import check_name as check_name
    from worker.baselines.names import lookup as lookup
    from worker.baselines.names import promote as promote
    from worker.baselines.plan_push import ConfigPush as ConfigPush
    from worker.baselines.plan_push import push_plan as push_plan
    from worker.baselines.reuse import Origin as Origin
    from worker.baselines.reuse import StoredBaselines as StoredBaselines
    from worker.baselines.store import Baseline as Baseline
    from worker.baselines.store import BaselineSettings as BaselineSettings
    from worker.baselines.store import BaselineStore as BaselineStore
    from worker.baselines.store import decode as decode
    from worker.baselines.timeline import Timeline as Timeline
    from worker.baselines.timeline import record_acceptance as record_acceptance
    from worker.baselines.timeline import record_push as record_push
    from worker.baselines.timeline import safely as safely
    from worker.baselines.timeline_records import example_rows as example_rows
    from worker.baselines.timeline_records import scoped_suite as scoped_suite
    from worker.baselines.timeline_records import suite_record as suite_record

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=[],
    submod_attrs={
        'keys': ['BaselineKey'],
        'local': ['GitRefStore', 'every_record', 'open_store'],
        'names': ['check_name', 'lookup', 'promote'],
        'plan_push': ['ConfigPush', 'push_plan'],
        'reuse': ['Origin', 'StoredBaselines'],
        'store': ['Baseline', 'BaselineSettings', 'BaselineStore', 'decode'],
        'timeline': ['Timeline', 'record_acceptance', 'record_push', 'safely'],
        'timeline_records': ['example_rows', 'scoped_suite', 'suite_record'],
    },
)
