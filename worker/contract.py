"""The job contract between the web process and the workers.

This is the only module of ``worker`` that ``app`` imports: job names, payload shapes and how job
ids are made. Payloads are plain JSON values (TypedDicts), so an old worker and a new web process
can overlap during a deploy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NotRequired, Protocol, TypedDict

#: The check run name; branch protection requires it, so it never changes.
CHECK_NAME = "llmgate"
#: How the name of a config's own check run starts (``settings.checks: per_config``):
#: ``llmgate: services/a`` for the config in ``services/a``
#: (worker/pipeline/report_values.py: `ConfigReport.check_name`).
CONFIG_CHECK_PREFIX = CHECK_NAME + ": "
#: Hidden marker line that identifies llmgate's sticky PR comment.
COMMENT_MARKER = "<!-- llmgate -->"
#: The comment command that asks for a fresh run.
RERUN_COMMAND = "/llmgate rerun"
#: The comment command by which a writer lets an untrusted head run (see worker/gate/trust.py).
APPROVE_COMMAND = "/llmgate approve"
#: ``identifier`` of the check run's "Approve and run" button (GitHub allows 20 characters).
APPROVE_ACTION = "approve"
#: ``identifier``s of a finished check run's "Re-run" and "Accept regression" buttons.
RERUN_ACTION = "rerun"
ACCEPT_ACTION = "accept"
#: The comment command that lists the commands.
HELP_COMMAND = "/llmgate help"

#: arq function names.
JOB_GATE_PULL_REQUEST = "gate_pull_request"
JOB_RERUN_FROM_COMMENT = "rerun_from_comment"
JOB_APPROVE = "approve_pull_request"
JOB_STORE_BASELINE = "store_baseline"
JOB_RERUN_CHECK = "rerun_check"
JOB_ACCEPT = "accept_regression"
JOB_MERGE_GROUP = "gate_merge_group"
JOB_ANSWER_SHARD = "answer_shard"
JOB_COMMAND_REPLY = "reply_to_command"
JOB_INSTALLATION = "installation_changed"
JOB_DELIVER_NOTIFICATION = "deliver_notification"

#: Redis key prefix for delivery de-duplication, and how long a delivery id is remembered.
DELIVERY_KEY_PREFIX = "llmgate:delivery:"
DELIVERY_TTL_S = 7 * 24 * 3600
#: What the web process records as a pull request's newest head (`pr_head_key`):
#: ``<head_sha>@<base_ref>`` (`pr_head_value`), or this value once the pull request is closed.
#: A run of any other head, or of the same head against another base branch, is superseded.
PR_CLOSED = "closed"
#: How long the record lives, seconds (a pull request untouched for longer is not tracked).
PR_HEAD_TTL_S = 30 * 24 * 3600
#: Redis key prefix of a stored full report (``worker.report.store`` writes, ``app.reports``
#: serves it at ``GET /reports/<id>``; the id is 32 lowercase hex characters).
REPORT_KEY_PREFIX = "llmgate:report:"
#: ``llmgate:report:<id>`` + this: the report's repository (``owner/name``), with the report's
#: expiry, so the web process can ask whether a signed-in user may read it
#: (``LLMGATE_REPORTS_REQUIRE_LOGIN``).
REPORT_REPO_SUFFIX = ":repo"
#: Redis keys the workers publish their metrics to and the web process's ``/metrics`` reads
#: (wire format version 1, described in worker/runtime/metrics.py).
SAMPLES_KEY = "llmgate:metrics:samples"
META_KEY = "llmgate:metrics:meta"
WORKERS_KEY = "llmgate:metrics:workers"
#: ``external_id`` of an llmgate check run: ``pr:<number>`` names its pull request (GitHub
#: leaves ``check_run.pull_requests`` empty for forks), ``mg:<base sha>`` a merge group's base.
PR_EXTERNAL_ID = re.compile(r"pr:([1-9][0-9]{0,9})")
MERGE_GROUP_EXTERNAL_ID = re.compile(r"mg:([0-9a-f]{40})")


def pr_external_id(pr_number: int) -> str:
    """Return the ``external_id`` of a pull request's check run: ``pr:<number>``."""
    return f"pr:{pr_number}"


def merge_group_external_id(base_sha: str) -> str:
    """Return the ``external_id`` of a merge group's check run: ``mg:<base sha>``."""
    return f"mg:{base_sha}"


def merge_group_key(repo: RepoRef, head_sha: str) -> str:
    """Return the Redis key the web process sets to `MERGE_GROUP_DESTROYED` when GitHub
    destroys the merge group of ``head_sha`` (merged, dequeued or invalidated): its gate's
    result will never be used, so a run of it stops (`worker.gate.supersede`)."""
    return f"llmgate:mg:{repo['owner']}/{repo['name']}@{head_sha}"


#: The `merge_group_key` value of a destroyed merge group.
MERGE_GROUP_DESTROYED = "destroyed"


def external_target(external_id: Any) -> tuple[int | None, str]:
    """Return ``(pr_number, merge_group_base)`` named by an ``external_id`` (None / "" if not).

    ``"pr:12"`` gives ``(12, "")``; ``"mg:<40 hex>"`` gives ``(None, sha)``; anything else,
    e.g. ``"pr:12; rm -rf"`` or a value that is not a string, gives ``(None, "")``.
    """
    text = external_id if isinstance(external_id, str) else ""
    if (pr := PR_EXTERNAL_ID.fullmatch(text)) is not None:
        return int(pr.group(1)), ""
    if (mg := MERGE_GROUP_EXTERNAL_ID.fullmatch(text)) is not None:
        return None, mg.group(1)
    return None, ""


class RepoRef(TypedDict):
    """The repository a job works on: ``owner``/``name`` and where to clone it from."""

    owner: str
    name: str
    clone_url: str


class ShardPayload(TypedDict):
    """Answer one shard of a gate's examples (worker/gate/shards.py).

    ``shard_key`` is the shard's Redis key prefix (its work at ``<key>:work``, its result
    written once at ``<key>:result``); ``installation_id`` is the App installation whose
    token checks the commit out.
    """

    shard_key: str
    installation_id: int


class GatePayload(TypedDict):
    """Gate one pull request head against its base.

    ``head_sha``/``base_sha`` are 40-hex commit SHAs; ``installation_id`` is the App installation.
    """

    delivery_id: str
    installation_id: int
    repo: RepoRef
    pr_number: int
    head_sha: str
    base_sha: str
    base_ref: str
    #: ``owner/name`` of the head repository (None: a deleted fork) and the PR's author; what
    #: trust is decided on. Absent from an older web process: the worker then asks GitHub.
    head_repo: NotRequired[str | None]
    author: NotRequired[str]
    #: Whether the pull request is a draft (absent: False); the base config's
    #: ``settings.drafts`` decides whether a draft runs.
    draft: NotRequired[bool]
    #: The delivery's ``pull_request.updated_at`` (ISO 8601 UTC, ``2026-11-30T10:02:00Z``):
    #: GitHub's time of the update that made ``head_sha`` the head, at the latest. The worker
    #: records it so an approval binds to the head its writer saw (worker/gate/head_history.py).
    #: Absent from an older web process, or from a job made without a delivery.
    updated_at: NotRequired[str]


class RerunPayload(TypedDict):
    """A ``/llmgate rerun`` comment: the worker checks the commenter's permission first."""

    delivery_id: str
    installation_id: int
    repo: RepoRef
    pr_number: int
    comment_id: int
    commenter: str
    #: ``/llmgate rerun --no-cache``: bypass the response cache for this run (absent: False).
    no_cache: NotRequired[bool]


class ApprovePayload(TypedDict):
    """A writer approves an untrusted PR head, by ``/llmgate approve`` or the check's button.

    ``source`` is ``comment`` or ``button``. ``head_sha`` is the check run's full SHA for a
    button, and for a comment the SHA (or a 7+ hex prefix) it named, or "" for the head the
    pull request had when the comment was written. ``comment_id`` is 0 for a button. The worker
    checks ``approver``'s permission first.
    """

    delivery_id: str
    installation_id: int
    repo: RepoRef
    pr_number: int
    approver: str
    source: str
    head_sha: str
    comment_id: int
    #: The comment's ``created_at`` (ISO 8601 UTC): a comment approves only the head the pull
    #: request had then (worker/gate/head_history.py). Absent for a button, and from an older
    #: web process (then only a full 40-hex SHA in the comment can approve).
    comment_created_at: NotRequired[str]


def gate_job_id(repo: RepoRef, pr_number: int, head_sha: str, suffix: str = "") -> str:
    """Return the deterministic arq job id of a gate run.

    Two deliveries for the same PR head (``opened`` and ``synchronize`` racing) map to one id, so
    arq starts one job; an explicit re-run passes a ``suffix`` (e.g. the comment id) to get a
    fresh one.
    """
    base = f"gate:{repo['owner']}/{repo['name']}#{pr_number}@{head_sha}"
    return f"{base}:{suffix}" if suffix else base


def pr_head_key(repo: RepoRef, pr_number: int) -> str:
    """Return the Redis key of a pull request's newest head: ``llmgate:pr:owner/name#N:head``.

    The web process sets it with each enqueue (`pr_head_value`) and on ``closed``
    (`PR_CLOSED`); workers read it to drop runs of older heads or bases (`worker.gate.supersede`).
    """
    return f"llmgate:pr:{repo['owner']}/{repo['name']}#{pr_number}:head"


def pr_head_value(head_sha: str, base_ref: str, updated_at: str = "") -> str:
    """Return the `pr_head_key` value of a pull request at ``head_sha`` against ``base_ref``.

    ``<head_sha>@<base_ref>``: the 40-hex head SHA, then the base branch name (the payload's
    ``pull_request.base.ref``, e.g. ``main``). A SHA has no ``@``, so the first ``@`` splits
    the value even when the branch name holds one (`split_pr_head`). With ``updated_at`` (the
    payload's ``pull_request.updated_at``, ISO 8601 UTC such as ``2026-11-30T10:02:00Z``), it
    follows after a space (no branch name holds one: git's check-ref-format): the web process
    never replaces a record with one of an older update (app/enqueue.py), so a delivery that
    arrives late cannot bring back an old head or base. The web process appends ``~``
    (`PR_HEAD_AMBIGUOUS`) to a record of the same ``updated_at`` second as one that named
    another head or base: the stamp could not order them (`is_ambiguous`).
    """
    return _stamped(f"{head_sha}@{base_ref}", updated_at)


def pr_closed_value(updated_at: str = "") -> str:
    """Return the `pr_head_key` value of a closed pull request: `PR_CLOSED`, followed by its
    ``updated_at`` as in `pr_head_value`, so a late delivery of an older update cannot undo
    the close."""
    return _stamped(PR_CLOSED, updated_at)


def _stamped(value: str, updated_at: str) -> str:
    return f"{value} {updated_at}" if updated_at else value


#: The mark the web process appends to a `pr_head_key` value it could not order by its stamp.
PR_HEAD_AMBIGUOUS = "~"


def is_ambiguous(value: str) -> bool:
    """Return whether a `pr_head_key` value ends in `PR_HEAD_AMBIGUOUS`: another delivery of
    the same ``updated_at`` second named another head or base, so GitHub must be asked which
    is current (app/enqueue.py)."""
    return value.endswith(PR_HEAD_AMBIGUOUS)


def split_pr_head(value: str) -> tuple[str, str]:
    """Return ``(head_sha, base_ref)`` of a `pr_head_key` value (`pr_head_value`).

    ``base_ref`` is "" for a bare head SHA, the value an older web process writes (compare the
    heads only), and for `PR_CLOSED` (whose ``head_sha`` is ``closed``; the web process stamps
    it with ``updated_at`` too: ``closed <updated_at>``).
    """
    head_sha, _, base_ref = value.partition(" ")[0].partition("@")
    return head_sha, base_ref


def rerun_job_id(repo: RepoRef, comment_id: int) -> str:
    """Return the deterministic arq job id of the job handling one rerun comment."""
    return f"rerun:{repo['owner']}/{repo['name']}:comment:{comment_id}"


def approve_job_id(repo: RepoRef, pr_number: int, *, comment_id: int = 0, head_sha: str = "",
                   approver: str = "") -> str:
    """Return the arq job id of an approval: per comment, or per (head SHA, approver) button.

    Two clicks of one writer on one check run make one job; a refused click by a reader does
    not block a writer's.
    """
    base = f"approve:{repo['owner']}/{repo['name']}#{pr_number}"
    return f"{base}:comment:{comment_id}" if comment_id else f"{base}@{head_sha}:{approver}"


class PushPayload(TypedDict):
    """A push to the repository's default branch: run the suites at ``sha`` and store them as
    the branch's baseline (worker/jobs/push.py). ``pushed_at`` is the push's Unix time in
    seconds (``repository.pushed_at``, 0 when absent); it orders pushes of one branch."""

    delivery_id: str
    installation_id: int
    repo: RepoRef
    branch: str
    sha: str
    pushed_at: int


def baseline_job_id(repo: RepoRef, sha: str) -> str:
    """Return the arq job id storing the baseline of one pushed commit (one job per SHA)."""
    return f"baseline:{repo['owner']}/{repo['name']}@{sha}"


class RecheckPayload(TypedDict):
    """Gate a head SHA afresh: GitHub's "Re-run" (``check_run``/``check_suite`` ``rerequested``)
    or the check run's "Re-run" button (``source`` ``check_run``, ``check_suite``, ``button``).

    ``pr_numbers`` are the pull requests the payload names (``pull_requests``, the check run's
    ``external_id`` ``pr:<n>``); the worker adds those of every ``llmgate`` check run on
    ``head_sha`` and gates each open one whose head is still ``head_sha``, against its own
    base. ``merge_group_base`` is the base SHA of a merge-group run (``external_id``
    ``mg:<sha>``), else "". ``app_id`` is the App that owns the check (0: not in the payload);
    the worker ignores another App's. ``requester`` is the sender's login (a button needs write).
    """

    delivery_id: str
    installation_id: int
    repo: RepoRef
    head_sha: str
    pr_numbers: list[int]
    merge_group_base: str
    app_id: int
    requester: str
    source: str


class AcceptPayload(TypedDict):
    """The "Accept regression" button of a failed ``llmgate`` check run, pressed by ``accepter``."""

    delivery_id: str
    installation_id: int
    repo: RepoRef
    pr_number: int
    check_run_id: int
    head_sha: str
    accepter: str


class MergeGroupPayload(TypedDict):
    """``merge_group`` ``checks_requested``: gate the group's head SHA against its base SHA.

    ``base_ref``/``head_ref`` are full refs (``refs/heads/main``).
    """

    delivery_id: str
    installation_id: int
    repo: RepoRef
    head_sha: str
    base_sha: str
    base_ref: str
    head_ref: str


class CommandPayload(TypedDict):
    """A ``/llmgate`` comment that gets a reply: ``kind`` ``help`` or ``unknown``.

    ``command`` is the comment's first line, reduced to letters, digits, spaces and ``._:/-``
    (at most 60 characters), safe to quote in the reply.
    """

    delivery_id: str
    installation_id: int
    repo: RepoRef
    pr_number: int
    comment_id: int
    commenter: str
    command: str
    kind: str


class InstallationPayload(TypedDict):
    """``installation`` or ``installation_repositories`` (``event``) with its ``action``.

    ``repos_added``/``repos_removed`` are ``owner/name`` full names.
    """

    delivery_id: str
    installation_id: int
    event: str
    action: str
    repos_added: list[str]
    repos_removed: list[str]


def event_job_id(kind: str, repo: RepoRef | None, key: str) -> str:
    """Return the arq job id of an event job: ``<kind>:<owner>/<name>:<key>``.

    ``key`` is what makes the job unique (a delivery id, a head SHA, a check run and login);
    ``repo`` None (installation events) gives ``<kind>:-:<key>``.
    """
    where = f"{repo['owner']}/{repo['name']}" if repo is not None else "-"
    return f"{kind}:{where}:{key}"


# ---------------------------------------------------------------- the queue's Redis
#: ``maxmemory-policy`` values that never delete a key to make room (redis.io/docs/latest/
#: develop/reference/eviction/): every other one (``allkeys-*``, ``volatile-*``) may evict a
#: queued job, a delivery mark or a pull request's head record.
SAFE_MAXMEMORY_POLICIES = frozenset({"noeviction"})


class RedisInfoClient(Protocol):
    """The two commands of a synchronous ``redis.Redis`` the start-up check uses."""

    def config_get(self, pattern: str = "*") -> Any:
        """``CONFIG GET pattern`` as a dict (refused by many managed services)."""

    def info(self, section: str | None = None) -> Any:
        """``INFO [section]`` parsed into a dict."""


def queue_redis_facts(client: RedisInfoClient) -> dict[str, str]:
    """Read what the start-up check needs: ``maxmemory-policy``, ``save``, AOF, cluster mode.

    ``INFO`` (always answered, managed services included) gives ``maxmemory_policy``,
    ``aof_enabled``, ``redis_mode`` and ``cluster_enabled``; ``CONFIG GET`` overrides the policy
    and adds ``save`` (the RDB schedule) where it is allowed. A refused ``CONFIG`` (renamed away,
    ``NOPERM``: an error reply) is simply skipped.

    Raises:
        redis.exceptions.ConnectionError: Redis cannot be reached (or refuses the password).
    """
    from redis.exceptions import ResponseError

    info = client.info()
    facts = {key: str(info[key]) for key in ("maxmemory_policy", "aof_enabled", "redis_mode",
                                             "cluster_enabled") if key in info}
    for name in ("maxmemory-policy", "save"):
        try:
            got = client.config_get(name)
        except ResponseError:  # CONFIG renamed away or not permitted: INFO must do
            continue
        if name in got:
            facts[name.replace("-", "_")] = str(got[name])
    return facts


def probe_queue_redis(url: str, timeout_s: float) -> tuple[str | None, list[str]]:
    """Read the queue's Redis at ``url`` once: (why it is refused or None, its warnings).

    Each command is bounded by ``timeout_s`` seconds (connecting included).

    Raises:
        redis.exceptions.ConnectionError: Redis cannot be reached, or refuses the password
            (``AuthenticationError``, a subclass). redis.exceptions.TimeoutError: too slow.
    """
    import redis

    client = redis.Redis.from_url(url, socket_timeout=timeout_s,
                                  socket_connect_timeout=timeout_s)
    try:
        facts = queue_redis_facts(client)
    finally:
        client.close()
    return queue_redis_refusal(facts), queue_redis_warnings(facts)


def queue_redis_refusal(facts: Mapping[str, str]) -> str | None:
    """Return why the queue's Redis must not be used (one line naming the setting), or None.

    The queue's Redis holds queued jobs, delivery marks and pull request head records: a
    ``maxmemory-policy`` that evicts loses gates silently (arq: "job ... expired"), and a
    cluster spreads arq's multi-key scripts over slots they cannot span. A policy that cannot
    be read at all is refused too (fail closed).
    """
    policy = facts.get("maxmemory_policy", "")
    if not policy:
        return ("maxmemory-policy of the queue's Redis (REDIS_URL) cannot be read from CONFIG "
                "GET or INFO; llmgate needs maxmemory-policy noeviction there")
    if policy not in SAFE_MAXMEMORY_POLICIES:
        return (f"maxmemory-policy of the queue's Redis (REDIS_URL) is {policy}, which can "
                "evict queued gates; set maxmemory-policy noeviction (put the response cache "
                "on LLMGATE_CACHE_REDIS_URL, which may evict)")
    if facts.get("redis_mode") == "cluster" or facts.get("cluster_enabled") == "1":
        return ("the queue's Redis (REDIS_URL) runs in cluster mode (cluster-enabled yes), "
                "which arq's multi-key scripts do not support; use a standalone Redis "
                "(a replica or Sentinel for failover)")
    return None


def queue_redis_warnings(facts: Mapping[str, str]) -> list[str]:
    """Return warnings about a usable queue Redis: persistence off (a restart loses the queue;
    the reconciler then re-queues from GitHub)."""
    if facts.get("aof_enabled") == "1" or facts.get("save"):
        return []
    unknown = "" if "save" in facts else " (RDB snapshots unknown: CONFIG is refused)"
    return [f"the queue's Redis (REDIS_URL) has AOF off{unknown} and no RDB snapshots: a restart "
            "empties the queue; set appendonly yes"]


def write_refusal(error: BaseException) -> str | None:
    """Why Redis refused a write, in a few words, or None when ``error`` is no such refusal.

    A Redis that answers may still refuse every write: ``OOM`` once ``maxmemory`` is reached
    under ``noeviction`` (what the queue's Redis must run), ``READONLY`` on a replica,
    ``MISCONF`` when it cannot persist and ``stop-writes-on-bgsave-error`` is on. Reads, deletes
    and expiries still work then (redis.io/docs/latest/develop/reference/eviction/: commands
    flagged ``denyoom``). Both processes name the state with this: the worker in its logs and
    heartbeat file, the web process in ``/readyz`` and ``/metrics``.

    Returns:
        ``"out of memory"``, ``"read-only replica"``, ``"cannot persist to disk"``, or None.
    """
    from redis.exceptions import OutOfMemoryError, ReadOnlyError, ResponseError

    if isinstance(error, OutOfMemoryError):
        return "out of memory"
    if isinstance(error, ReadOnlyError):
        return "read-only replica"
    if isinstance(error, ResponseError) and str(error).startswith("MISCONF"):
        return "cannot persist to disk"
    return None
