"""When each head SHA of a pull request became its head, so an approval binds to what was seen.

``/llmgate approve`` without a SHA (or with a 7+ hex prefix) approves the head the pull request
had **when the writer wrote the comment**, not the head it has when the worker handles the
comment: a fork can push between the two, and its new head must not run with the repository's
keys on an approval given to the old one (issue 30). Which head was current at the comment's
``created_at`` needs the time each head arrived, from a fact the fork cannot forge:

- the head commit's committer or author date is written by whoever made the commit: the fork
  can date a commit pushed after the comment to before it;
- the issue timeline (``GET .../issues/{n}/timeline``) lists ``committed`` events with those same
  git dates; only a force push has an event stamped by GitHub (``head_ref_force_pushed``), a
  fast-forward push has none;
- the pull request's ``updated_at`` read when the comment is handled moves with any later update
  (a label, the comment itself), so it does not say when the head changed;
- ``pull_request.updated_at`` in the ``opened``/``synchronize``/``reopened``/
  ``ready_for_review``/``edited`` delivery that names a head **is** such a fact: GitHub sets it
  when the push updates the pull request, on the same clock as ``comment.created_at``, and the
  delivery is signed (HMAC). It is never earlier than the moment the pull request showed that
  head (GitHub writes it with the new head, before it sends the event).

So the gate job of each such delivery records ``(head SHA, updated_at)`` here (`HeadHistory.
record`, the web process puts ``updated_at`` in the payload), and the approval job asks which
head was recorded as current at the comment's ``created_at`` (`HeadHistory.head_at`). Only
that head may be approved by the comment, and only if it is still the head. Every gap fails
closed: a head llmgate never saw a delivery for is never the answer (a lost delivery leaves the
previous head as "current", which is then not the pull request's head, so nothing runs), and a
push in the same second as the comment (GitHub's times count whole seconds) cannot be ordered,
so it is not taken as seen. The one thing the record cannot know is a visit whose delivery never
came: push A, push X (its delivery lost), force-push A again; a comment written while X was the
head is then taken as written while A was (documented in docs/security-model.md).

The record is a Redis sorted set, ``llmgate:pr:<owner>/<name>#<n>:heads``: member the head SHA,
score the Unix second (GitHub's clock) at which it last became the head. A delivery for a head
already recorded keeps the earlier time, unless another head was recorded between the two
(the head came back: push A, push B, force-push A), which moves it to the later time. Deliveries
may be handled in any order: each recorded time is one at which that SHA was the head, so as
long as every head's arrival was delivered, no order makes a comment bind to a head that was
not the head when it was written; a late delivery can only make llmgate refuse one that was.
The set keeps the newest `MAX_HEADS` heads and lives `worker.contract.PR_HEAD_TTL_S` seconds
after the last delivery recorded in it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from redis.asyncio import Redis

from worker.contract import APPROVE_COMMAND, PR_HEAD_TTL_S

#: A time as GitHub writes it in webhook payloads: ISO 8601, UTC, whole seconds.
GITHUB_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
#: How many heads of one pull request are kept (the oldest are dropped; a comment older than
#: every head kept binds to none, so nothing runs).
MAX_HEADS = 256

#: KEYS[1] the set; ARGV: head SHA, Unix s, TTL s, MAX_HEADS. Returns the time recorded.
_RECORD = """
local at = tonumber(ARGV[2])
local raw = redis.call('ZSCORE', KEYS[1], ARGV[1])
if raw then
  local seen = tonumber(raw)
  local between = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. raw, at, 'LIMIT', 0, 1)
  if at <= seen or #between == 0 then
    at = math.min(seen, at)
  end
end
redis.call('ZADD', KEYS[1], at, ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(ARGV[4]) + 1))
redis.call('EXPIRE', KEYS[1], ARGV[3])
return at
"""


def github_time_s(text: str) -> int | None:
    """Return a GitHub time (``2026-11-30T10:02:00Z``) as Unix seconds, or None if malformed."""
    if not GITHUB_TIME.fullmatch(text):
        return None
    try:
        moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:  # 2026-13-45T...: the right shape, not a date
        return None
    return int(moment.timestamp())


@dataclass(frozen=True)
class HeadAt:
    """The head a pull request had at one moment, as far as the record tells.

    Attributes:
        head_sha: the 40-hex head SHA, or "" when the record cannot tell.
        unknown_why: when ``head_sha`` is "", one clause saying why ("" otherwise).
    """

    head_sha: str
    unknown_why: str = ""


class HeadHistory:
    """The heads each pull request had and since when, in Redis (see the module docstring)."""

    def __init__(self, redis: Redis, ttl_s: int = PR_HEAD_TTL_S) -> None:
        """Keep each pull request's record in ``redis`` for ``ttl_s`` seconds after a push."""
        self._redis = redis
        self._ttl_s = ttl_s

    @staticmethod
    def key(repo_key: str, pr_number: int) -> str:
        """Return the Redis key of one pull request's heads (``repo_key`` is ``owner/name``)."""
        return f"llmgate:pr:{repo_key}#{pr_number}:heads"

    async def record(self, repo_key: str, pr_number: int, head_sha: str,
                     updated_at: str) -> int | None:
        """Record that a delivery named ``head_sha`` as the head, with GitHub's ``updated_at``.

        Args:
            repo_key: ``owner/name``.
            pr_number: the pull request.
            head_sha: the 40-hex head SHA the delivery names.
            updated_at: the delivery's ``pull_request.updated_at`` (``2026-11-30T10:02:00Z``).

        Returns:
            The Unix second now recorded for the head, or None when ``updated_at`` is absent or
            malformed (nothing is recorded: an approval then cannot bind to this head).

        Raises:
            redis.exceptions.RedisError: Redis refused or could not be reached.
        """
        at_s = github_time_s(updated_at)
        if at_s is None:
            return None
        recorded = await self._redis.eval(  # type: ignore[misc]  # redis-py: Awaitable | value
            _RECORD, 1, self.key(repo_key, pr_number), head_sha, str(at_s), str(self._ttl_s),
            str(MAX_HEADS))
        return int(recorded)

    async def head_at(self, repo_key: str, pr_number: int, at_s: int) -> HeadAt:
        """Return the head the record gives for Unix second ``at_s`` (GitHub's clock).

        That is the head recorded last at or before ``at_s``; the record cannot tell when none
        was, or when that head (or another one) arrived in the same second ``at_s`` itself or
        together with it: a comment of that second may have been written before the push.

        Raises:
            redis.exceptions.RedisError: Redis refused or could not be reached.
        """
        rows = await self._redis.zrevrangebyscore(self.key(repo_key, pr_number), at_s, "-inf",
                                                  start=0, num=2, withscores=True)
        if not rows:
            return HeadAt("", "llmgate saw no push of this pull request before it")
        (newest, newest_s), *rest = rows
        if int(newest_s) == at_s or (rest and int(rest[0][1]) == int(newest_s)):
            return HeadAt("", "a push in the same second cannot be ordered against it")
        sha = newest.decode() if isinstance(newest, bytes) else str(newest)
        return HeadAt(sha)


def bind_comment(named: str, head_sha: str, seen: HeadAt) -> str:
    """Return "" when an approve comment approves the head ``head_sha``, else the reply (pure).

    A full 40-hex SHA names one commit by itself (nobody can write it before the commit exists),
    so it approves exactly that commit whenever it is the head. "" and a prefix approve the head
    the pull request had when the comment was written (``seen``), and only while it is still
    the head: a prefix of 7 hex digits is no guard alone, since a fork can make a commit whose
    SHA starts with the one a writer named (2^28 tries).

    Args:
        named: the SHA or 7+ hex prefix the comment names, "" for none.
        head_sha: the pull request's head now, as GitHub reports it (40 hex).
        seen: what the record gives for the comment's ``created_at`` (`HeadHistory.head_at`).

    Returns:
        "" to approve ``head_sha``, or the markdown of one reply saying which commit the
        comment approves and how to approve the head. SHAs are hex and the command is
        llmgate's own, so the reply can carry no mention or link of anyone's choosing.
    """
    if head_sha == named:
        return ""
    command, short = f"{APPROVE_COMMAND} {named}".strip(), head_sha[:7]
    again = (f" To run `{short}`, review it and comment `{APPROVE_COMMAND}` again, or "
             f"`{APPROVE_COMMAND} {head_sha}`.")
    if not head_sha.startswith(named):
        return (f"`{command}` names a commit that is not this pull request's head "
                f"`{short}`, so nothing ran.{again}")
    if seen.head_sha == head_sha:
        return ""
    if not seen.head_sha:
        return (f"llmgate cannot tell which head this pull request had when `{command}` was "
                f"written ({seen.unknown_why}), so nothing ran. To run `{short}`, review it "
                f"and comment `{APPROVE_COMMAND} {head_sha}` (the full SHA).")
    return (f"`{command}` was written when the head was `{seen.head_sha[:7]}`, so it approves "
            f"only that commit. The head is now `{short}`, pushed after the comment, and "
            f"nothing ran: an approval covers the head its writer saw.{again}")
