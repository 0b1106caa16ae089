"""Mark a delivery as seen and enqueue its arq job in one Redis round trip.

arq's own ``enqueue_job`` costs four round trips (WATCH, EXISTS, then MULTI/PSETEX/ZADD/EXEC
in a pipeline) and the delivery mark one more; on the receiver's hot path that was about 60% of
its time. Here one Lua script (``EVALSHA``; loaded on the first ``NOSCRIPT`` answer, e.g. after a
Redis restart) does the same work atomically:

1. ``SET llmgate:delivery:<id> 1 NX EX <ttl>`` semantics, for the delivery id and for the
   SHA-256 of the raw body (``llmgate:body:<hex>``): a delivery whose id *or* body was seen
   before is a duplicate, and nothing else happens;
2. if a job is planned and neither ``arq:job:<job id>`` nor ``arq:result:<job id>`` exists
   (arq's own uniqueness rule), ``PSETEX`` the job and ``ZADD`` it to ``arq:queue`` with the
   enqueue time (ms) as score, exactly as ``ArqRedis.enqueue_job`` does;
3. optionally ``SET`` a pull request's newest head (``llmgate:pr:...:head``,
   ``<head_sha>@<base_ref>`` or ``closed``) with its TTL, so workers can drop runs of older
   heads or of an old base branch (``worker.gate.supersede``). When the job id exists already,
   only the head SHAs are compared (the part before the first ``@``; a bare SHA written by an
   older web process has no base part). A recorded head that is another SHA (or ``closed``)
   means the head came back to a commit gated before (push A, push B, force-push A): A's old
   run was superseded, so the job is queued under its ``returned_job_id`` instead of being
   answered "already queued". The same head SHA means a racing or late ``opened`` or
   ``synchronize`` of the head already recorded (a change of base comes as ``edited``, with a
   fresh job id): it is "already queued" and the record is left as it is, so a late delivery
   that still names the old base cannot turn the record back to it. Nor is a record replaced
   by one of an older update: both end in the pull request's ``updated_at`` (ISO 8601 UTC,
   which sorts as text), and a late ``synchronize``, ``ready_for_review`` or swapped
   ``edited`` delivery carries an older one (a record without a stamp, from an older web
   process, is always replaced). The stamp counts whole seconds, so two updates of one second
   (two retargets) cannot be ordered by it: a record of the same second as the current one
   that names another head or base, or that replaces such a record, still wins but ends in
   ``~`` (``<head_sha>@<base_ref> <updated_at>~``), and a run it names asks GitHub before it
   trusts it (`worker.gate.supersede`);
4. only then write the two marks, with the same TTL.

Why the body too: GitHub's own redeliveries reuse the delivery id, but ``X-GitHub-Delivery`` is
not signed, so a captured signed body re-sent under a new id passes the HMAC check. Keying on
the body's hash refuses such a replay for as long as the marks live (``DELIVERY_TTL_S``).

Real events almost always differ in their bodies (ids, SHAs, timestamps), with one exception
that matters: a pull request retargeted back and forth within one second (``main`` ->
``loose`` -> ``main`` -> ``loose`` -> ``main``) sends byte-identical ``edited`` bodies, since
``updated_at`` counts whole seconds (issue 30). Dropping the last of them left the gate on the
base the pull request had just left. So de-duplication never drops a delivery that changes
what is gated: a body seen before, under a new delivery id, that carries a pull request's
newest head (step 3) naming another head or base than the record holds now is taken again
(its ``edited`` job id is new, as it carries the delivery id), at most `BODY_RETAKES_MAX`
times per body; the body mark counts the times taken. Anything else seen before is a
duplicate, as is every body that would change nothing. A replayed body is thus worth at most
`BODY_RETAKES_MAX` more jobs, and the record such a body leaves is marked ``~`` (the same
second as the record it replaces) or not written at all (an older one), so its run asks
GitHub whether it is still wanted before it runs anything (`worker.gate.supersede`).

All reads come before all writes, so a script refused by Redis (ACL ``NOPERM`` on a key, out of
memory on the first write) changes nothing and a redelivery is not taken for a duplicate.

This ties the web process to arq's key layout and job format. The job bytes come from arq's own
``serialize_job`` and the key names from ``arq.constants``; ``tests/unit/app/test_app_enqueue.py``
runs a real arq ``Worker`` on jobs queued here, so an arq release that changes the layout fails
that test rather than production.
"""

from __future__ import annotations

import enum
import hashlib

from arq.constants import default_queue_name, expires_extra_ms, job_key_prefix, result_key_prefix
from arq.jobs import serialize_job
from arq.utils import timestamp_ms
from redis.exceptions import NoScriptError

from app.redis_pipe import RedisPipe, pack
from app.routes import PlannedJob
from worker.contract import DELIVERY_KEY_PREFIX, DELIVERY_TTL_S, PR_HEAD_TTL_S

#: Prefix of the mark keyed by the hex SHA-256 of a delivery's raw body (replay guard).
BODY_KEY_PREFIX = "llmgate:body:"

#: How many times a body seen before is taken again because it changes a pull request's
#: recorded head or base (module docstring): GitHub repeats a body only when a pull request
#: flips back and forth within one second; a replayer gets at most this many jobs per body.
BODY_RETAKES_MAX = 3

#: KEYS (always 8): delivery mark, body mark, arq job key, arq result key, arq queue, PR head
#: key, arq job key and result key of the returned-head job id. ARGV (always 9): mark TTL (s),
#: job id ("" for no job), serialized job, job expiry (ms), queue score (ms), PR head value
#: (``<head_sha>@<base_ref>``, ``closed``, or "" to set none), PR head TTL (s), returned-head
#: job id ("" for none), `BODY_RETAKES_MAX`. Keys of absent parts
#: repeat the delivery mark and are not touched.
#: Returns 0 duplicate delivery, 1 marked (and queued, when a job was given), 2 already queued.
SCRIPT = b"""
local marked = redis.call('EXISTS', KEYS[1], KEYS[2])
local result = 1
local record = ARGV[6]
local current = false
if record ~= '' then current = redis.call('GET', KEYS[6]) end
local taken = 1
if marked > 0 then
  if record == '' or redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
  taken = (tonumber(redis.call('GET', KEYS[2])) or 1) + 1
  if taken > tonumber(ARGV[9]) + 1 then return 0 end
  if current and string.match(current, '^%S+') == string.match(record, '^%S+') then
    return 0
  end
end
if ARGV[2] ~= '' then
  local job_id = ARGV[2]
  if redis.call('EXISTS', KEYS[3], KEYS[4]) > 0 then
    job_id = ''
    if ARGV[8] ~= '' and record ~= '' then
      if current and string.match(current, '^[^@ ]*') == string.match(record, '^[^@ ]*') then
        record = ''
      elseif current and redis.call('EXISTS', KEYS[7], KEYS[8]) == 0 then
        job_id = ARGV[8]
      end
    end
  end
  if job_id == '' then
    result = 2
  else
    redis.call('PSETEX', job_id == ARGV[2] and KEYS[3] or KEYS[7], ARGV[4], ARGV[3])
    redis.call('ZADD', KEYS[5], ARGV[5], job_id)
  end
end
if record ~= '' and current then
  local older = string.match(current, ' ([^~%s]+)~?$')
  local newer = string.match(record, ' ([^~%s]+)~?$')
  if older and newer and newer < older then
    record = ''
  elseif older and newer == older and (string.sub(current, -1) == '~'
      or string.match(current, '^%S+') ~= string.match(record, '^%S+')) then
    record = record .. '~'
  end
end
if record ~= '' then
  redis.call('SET', KEYS[6], record, 'EX', ARGV[7])
end
redis.call('SET', KEYS[1], '1', 'EX', ARGV[1])
redis.call('SET', KEYS[2], tostring(taken), 'EX', ARGV[1])
return result
"""
#: The SHA-1 Redis knows the script by (``EVALSHA``).
SCRIPT_SHA = hashlib.sha1(SCRIPT, usedforsecurity=False).hexdigest()
_LOAD_SCRIPT = pack("SCRIPT", "LOAD", SCRIPT)


class Outcome(enum.IntEnum):
    """What the script did with one delivery (its integer reply)."""

    DUPLICATE = 0
    """The delivery id, or the exact body, was seen before (a body that changes a pull
    request's recorded head or base is taken again instead: module docstring); nothing was
    written."""
    MARKED = 1
    """The delivery is marked as seen and its job, if any, is queued."""
    ALREADY_QUEUED = 2
    """The delivery is marked; a job with the same id is queued, running, or has a result."""


def script_arguments(delivery_id: str, body_sha256: str, job: PlannedJob | None,
                     now_ms: int | None = None, head_record: tuple[str, str] | None = None,
                     ) -> tuple[list[str], list[str | bytes | int]]:
    """Return the (KEYS, ARGV) of the script for one delivery.

    Args:
        delivery_id: the ``X-GitHub-Delivery`` header, already checked.
        body_sha256: the hex SHA-256 of the raw body (64 characters), see ``body_digest``.
        job: the job to enqueue, or ``None`` to only mark the delivery.
        now_ms: the enqueue time, Unix ms (default: now); arq stores it in the job and uses it
            as the queue score, so the job is due at once.
        head_record: ``(key, value)`` of a pull request's newest head to SET for
            ``PR_HEAD_TTL_S`` seconds (``value``: ``<head_sha>@<base_ref>`` or ``closed``),
            or ``None``; left as it is when ``job`` is already queued for the recorded head
            SHA and has a ``returned_job_id`` (see the module docstring, step 3).
    """
    mark = DELIVERY_KEY_PREFIX + delivery_id
    keys = [mark, BODY_KEY_PREFIX + body_sha256, mark, mark, mark, mark, mark, mark]
    args: list[str | bytes | int] = [DELIVERY_TTL_S, "", "", 0, 0, "", 0, "",
                                     BODY_RETAKES_MAX]
    if job is not None:
        enqueued_ms = timestamp_ms() if now_ms is None else now_ms
        keys[2:5] = [job_key_prefix + job.job_id, result_key_prefix + job.job_id,
                     default_queue_name]
        data = serialize_job(job.function, (job.payload,), {}, None, enqueued_ms)
        args[1:5] = [job.job_id, data, expires_extra_ms, enqueued_ms]
        if job.returned_job_id and head_record is not None:
            keys[6:8] = [job_key_prefix + job.returned_job_id,
                         result_key_prefix + job.returned_job_id]
            args[7] = job.returned_job_id
    if head_record is not None:
        keys[5] = head_record[0]
        args[5:7] = [head_record[1], PR_HEAD_TTL_S]
    return keys, args


def body_digest(body: bytes) -> str:
    """Return the hex SHA-256 of a delivery's raw body bytes: its replay-guard key."""
    return hashlib.sha256(body).hexdigest()


async def mark_and_enqueue(pipe: RedisPipe, delivery_id: str, body_sha256: str,
                           job: PlannedJob | None,
                           head_record: tuple[str, str] | None = None) -> Outcome:
    """Mark ``delivery_id`` and its body as seen and enqueue ``job`` (if any), atomically.

    One round trip; ``body_sha256`` is ``body_digest(body)``. The delivery mark present
    already makes the delivery a ``DUPLICATE``, and so does the body mark unless
    ``head_record`` names another head or base than the one recorded now (then the body is
    taken again, at most `BODY_RETAKES_MAX` times: module docstring). A ``DUPLICATE`` writes
    nothing, not even ``head_record``.
    All of it, including loading the script after a ``NOSCRIPT``, must finish within the
    pipe's ``reply_timeout_s``.

    Raises:
        redis.exceptions.RedisError: Redis refused the script, the connection failed or the
            time ran out; no state was changed unless the reply was lost after the script ran.
    """
    keys, args = script_arguments(delivery_id, body_sha256, job, head_record=head_record)
    command = pack("EVALSHA", SCRIPT_SHA, len(keys), *keys, *args)
    deadline = pipe.deadline()
    try:
        reply = await pipe.execute(command, deadline)
    except NoScriptError:  # a new or restarted Redis: load the script once, then run it
        await pipe.execute(_LOAD_SCRIPT, deadline)
        reply = await pipe.execute(command, deadline)
    return Outcome(int(reply))
