"""One worker process: settings, leases, locks, logs, metrics, hardening.

Face (``__all__``, worker/README.md's import rule 7): what other packages import of this
one, each name loaded from its module on first use.
"""

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:
    from worker.runtime import locks as locks
    from worker.runtime.epoch import FIRST as FIRST
    from worker.runtime.epoch import LOST as LOST
    from worker.runtime.epoch import EpochWatch as EpochWatch
    from worker.runtime.fence import fence_finished_jobs as fence_finished_jobs
    from worker.runtime.fence import guard_write as guard_write
    from worker.runtime.hardening import check_redis_socket as check_redis_socket
    from worker.runtime.hardening import check_settings as check_settings
    from worker.runtime.hardening import harden as harden
    from worker.runtime.lease import CTX_KEY as CTX_KEY
    from worker.runtime.lease import JobLimits as JobLimits
    from worker.runtime.lease import JobRef as JobRef
    from worker.runtime.lease import current_job as current_job
    from worker.runtime.lifecycle import heartbeat_file as heartbeat_file
    from worker.runtime.lifecycle import instrument_all as instrument_all
    from worker.runtime.lifecycle import shutdown_grace_s as shutdown_grace_s
    from worker.runtime.lifecycle import start_publishing as start_publishing
    from worker.runtime.lifecycle import stop_publishing as stop_publishing
    from worker.runtime.logs import configure_worker_logging as configure_worker_logging
    from worker.runtime.metrics import METRICS as METRICS
    from worker.runtime.metrics import Family as Family
    from worker.runtime.metrics import record_call as record_call
    from worker.runtime.metrics import record_gate_report as record_gate_report
    from worker.runtime.metrics import record_github_response as record_github_response
    from worker.runtime.poll_guard import guard_poll_loop as guard_poll_loop
    from worker.runtime.redis_checks import check_queue_redis as check_queue_redis
    from worker.runtime.redis_checks import note_write_refused as note_write_refused
    from worker.runtime.redis_checks import outage_s as outage_s
    from worker.runtime.redis_checks import patient_redis as patient_redis
    from worker.runtime.redis_checks import retry_options as retry_options
    from worker.runtime.settings import DEFAULT_API_URL as DEFAULT_API_URL
    from worker.runtime.settings import SettingsError as SettingsError
    from worker.runtime.settings import WorkerConfig as WorkerConfig
    from worker.runtime.settings import whole_number as whole_number
    from worker.runtime.shard_settings import ShardSettings as ShardSettings
    from worker.runtime.stopping import guard_stopping as guard_stopping

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=['locks'],
    submod_attrs={
        'epoch': ['EpochWatch', 'FIRST', 'LOST'],
        'fence': ['fence_finished_jobs', 'guard_write'],
        'hardening': ['check_redis_socket', 'check_settings', 'harden'],
        'lease': ['CTX_KEY', 'JobLimits', 'JobRef', 'current_job'],
        'lifecycle': [
            'heartbeat_file', 'instrument_all', 'shutdown_grace_s', 'start_publishing',
            'stop_publishing',
        ],
        'logs': ['configure_worker_logging'],
        'metrics': [
            'Family', 'METRICS', 'record_call', 'record_gate_report', 'record_github_response',
        ],
        'poll_guard': ['guard_poll_loop'],
        'redis_checks': [
            'check_queue_redis', 'note_write_refused', 'outage_s', 'patient_redis', 'retry_options',
        ],
        'settings': ['DEFAULT_API_URL', 'SettingsError', 'WorkerConfig', 'whole_number'],
        'shard_settings': ['ShardSettings'],
        'stopping': ['guard_stopping'],
    },
)
