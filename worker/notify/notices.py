"""Plan a push's notifications: read the opt-in, compare with the previous push, enqueue.

Called by the push job (worker/jobs/push.py) for each config it stored, after the store: the
config's ``notify`` (worker/evals/config/notify_key.py) names the suites, `worker.notify.verdict`
decides, and one delivery job per channel the operator set (`NotifySettings.channels`) is
enqueued (worker/jobs/notify.py). Nothing here raises into the push job: an error is logged and
returned as the plan's status, and the baseline stays stored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path

from arq.connections import ArqRedis
from redis.exceptions import RedisError

from worker.errors import ConfigError
from worker.evals.config import read_notify
from worker.evals.context import EvalContext
from worker.evals.types import Config, RunResult
from worker.notify.channels import NotifySettings
from worker.notify.deliver import JOB_DELIVER_NOTIFICATION, NotifyPayload, notify_job_id
from worker.notify.message import Notice, build_notice
from worker.notify.verdict import PreviousRun, PushVerdict, judge_push
from worker.pipeline import folder_root, read_config

log = logging.getLogger("llmgate.notify")

#: Opens a checkout of a commit of the pushed repository: ``sha -> async context of its root``.
OpenTree = Callable[[str], AbstractAsyncContextManager[Path]]


@dataclass(frozen=True)
class PushedConfig:
    """One config of a push, as the push job stored it.

    Attributes:
        repository: ``owner/name``; clone_url: where it is cloned from (for commit links).
        folder: the config's folder ("" for the root config); root: its folder in the
            pushed commit's checkout.
        branch, sha: the pushed branch and commit.
        config: the config at ``sha``; run: the run just stored.
        redact: hides the worker's secrets in texts that leave the worker.
        report_url: the URL of the run's stored report (worker/jobs/push.py `_push_report`),
            which the notice links; "" when none was stored (reports off, or storing failed).
    """

    repository: str
    clone_url: str
    folder: str
    branch: str
    sha: str
    root: Path
    config: Config
    run: RunResult
    redact: Callable[[str], str] = field(default=str)
    report_url: str = ""


def opts_in(root: Path, config: Config) -> bool:
    """Return whether the config at ``root`` has a ``notify`` key (True when it cannot be read
    again: `plan_notice` then says why). Lets the push job skip reading the previous run."""
    try:
        return read_notify(root, config.path) is not None
    except ConfigError:
        return True


async def plan_notice(push: PushedConfig, previous: PreviousRun | None, open_tree: OpenTree,
                      evals: EvalContext | None = None) -> tuple[str, Notice | None]:
    """Return the push's status for notifications and its notice (None: nothing to tell).

    Statuses: ``off`` (no ``notify`` in the config), ``first`` (no previous push to compare
    with), ``same`` (the previous push is this commit: a job run again), ``passed``,
    ``regressed`` or ``undecided`` (with a notice).
    """
    try:
        options = read_notify(push.root, push.config.path)
    except ConfigError as err:  # the loader accepted it: only a file changed meanwhile
        options, problem = None, push.redact(str(err))
        log.warning("notify of %s@%s not read: %s", push.repository, push.sha[:7], problem)
    if options is None:
        return "off", None
    if previous is None:
        return "first", None
    if previous.sha == push.sha:
        return "same", None
    suites = options.selects([s.name for s in push.config.suites])
    verdict = await _judge(push, previous, suites, open_tree, evals)
    if verdict.status == "passed":
        return "passed", None
    return verdict.status, build_notice(verdict, repository=push.repository, folder=push.folder,
                                        branch=push.branch, sha=push.sha,
                                        clone_url=push.clone_url,
                                        report_url=push.report_url or None, redact=push.redact)


async def _judge(push: PushedConfig, previous: PreviousRun, suites: tuple[str, ...],
                 open_tree: OpenTree, evals: EvalContext | None) -> PushVerdict:
    """Check the previous commit out, read its config there and compare (fail closed)."""
    try:
        async with open_tree(previous.sha) as tree:
            folder = folder_root(tree, push.folder)
            try:
                config = read_config(folder, push.config.path) if folder is not None else None
            except ConfigError as err:
                return PushVerdict("undecided", previous.sha, reason=push.redact(
                    f"the previous push's config is invalid: {err}"))
            return await judge_push(previous, config, push.config, push.root, push.run,
                                    suites, evals)
    except Exception as err:  # noqa: BLE001 - fail closed: a checkout error is undecided
        text = push.redact(str(err) or type(err).__name__)
        return PushVerdict("undecided", previous.sha, reason=(
            f"the previous push {previous.sha[:7]} could not be checked out "
            f"({type(err).__name__}: {text})"))


async def enqueue_notice(queue: ArqRedis, settings: NotifySettings, notice: Notice) -> list[str]:
    """Enqueue one delivery job per channel of ``settings``; return the channels queued.

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    queued: list[str] = []
    for channel in settings.channels:
        payload = NotifyPayload(channel=channel, notice=notice, attempt=1)
        await queue.enqueue_job(JOB_DELIVER_NOTIFICATION, payload,
                                _job_id=notify_job_id(payload))
        queued.append(channel)
    return queued


async def notify_push(queue: ArqRedis, settings: NotifySettings, push: PushedConfig,
                      previous: PreviousRun | None, open_tree: OpenTree,
                      evals: EvalContext | None = None) -> str:
    """Compare ``push`` with ``previous`` (`plan_notice`) and enqueue its deliveries
    (`enqueue_notice`); return the status, with the channels queued (e.g. ``regressed: queued
    slack,webhook``). Never raises for the push's sake: a Redis error is logged and returned
    (``...: not queued (<error>)``).
    """
    status, notice = await plan_notice(push, previous, open_tree, evals)
    if notice is None:
        return status
    try:
        queued = await enqueue_notice(queue, settings, notice)
    except RedisError as err:
        log.warning("push of %s@%s: %s, notification not queued: %s", push.repository,
                    push.sha[:7], status, type(err).__name__)
        return f"{status}: not queued ({type(err).__name__})"
    log.info("push of %s@%s: %s against %s, notified %s", push.repository, push.sha[:7],
             status, notice["previous_sha"][:7], ", ".join(queued))
    return f"{status}: queued {','.join(queued)}"
