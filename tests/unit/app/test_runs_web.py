"""The web side of the run lifecycle: real signed deliveries into the app, a real Redis queue.

Every ``pull_request`` delivery that plans a gate also records the PR's newest head and base
branch (``<head_sha>@<base_ref>``), in the same single Redis round trip (the enqueue script);
``closed`` records ``closed`` and plans nothing;
``reopened`` and ``ready_for_review`` get a job id of their own, so they start a run even when
the head's plain job id still has a result in arq; ``draft`` travels in the payload.
"""

from __future__ import annotations

import redis as redis_sync

from app.enqueue import BODY_RETAKES_MAX
from tests.unit.app_support import (
    BASE_SHA,
    HEAD_SHA,
    encode,
    fixture_json,
    post,
    queued_jobs,
    running_app,
    settings,
)
from worker.contract import PR_HEAD_TTL_S, gate_job_id, pr_head_key, pr_head_value

REPO = {"owner": "Codertocat", "name": "Hello-World",
        "clone_url": "https://github.com/Codertocat/Hello-World.git"}
HEAD_KEY = pr_head_key(REPO, 2)  # type: ignore[arg-type]
#: The fixtures' pull request #2 is based on ``master``.
HEAD_VALUE = pr_head_value(HEAD_SHA, "master").encode()


def _payload(action: str, *, draft: bool = False, head_sha: str = HEAD_SHA) -> bytes:
    data = fixture_json(f"pull_request.{action}.json")
    data["pull_request"]["draft"] = draft
    data["pull_request"]["head"]["sha"] = head_sha
    return encode(data)


def _get(redis_url: str, key: str) -> tuple[bytes | None, int]:
    client = redis_sync.Redis.from_url(redis_url)
    try:
        return client.get(key), int(client.ttl(key))  # type: ignore[arg-type]
    finally:
        client.close()


def _recorded(redis_url: str) -> bytes | None:
    """The PR head record without its ``updated_at`` stamp (`pr_head_value`)."""
    value = _get(redis_url, HEAD_KEY)[0]
    return None if value is None else value.partition(b" ")[0]


async def test_each_enqueue_records_the_newest_head_in_one_round_trip(redis_url: str) -> None:
    newer = "d" * 40
    async with running_app(settings(redis_url)) as client:
        first = await post(client, "pull_request", "d-1", _payload("opened"))
        assert (first.status_code, first.json()) == (202, {"status": "queued"})
        assert _recorded(redis_url) == HEAD_VALUE
        stats = redis_sync.Redis.from_url(redis_url)
        stats.config_resetstat()
        second = await post(client, "pull_request", "d-2", _payload("synchronize", head_sha=newer))
        assert second.status_code == 202
        commands = {name: info["calls"] for name, info in stats.info("commandstats").items()
                    if "config" not in name}
        stats.close()
        assert commands.pop("cmdstat_evalsha") == 1  # the one round trip ...
        assert commands == {"cmdstat_exists": 2, "cmdstat_get": 1, "cmdstat_psetex": 1,
                            "cmdstat_zadd": 1, "cmdstat_set": 3}  # ... whose script also
        # reads the record (never replaced by an older update) and SETs the head
        value, ttl = _get(redis_url, HEAD_KEY)
        assert value is not None and value.startswith(f"{newer}@master ".encode())
        assert PR_HEAD_TTL_S - 5 <= ttl <= PR_HEAD_TTL_S
        again = await post(client, "pull_request", "d-1", _payload("synchronize"))  # redelivery
        assert again.json() == {"status": "duplicate"}
        assert _recorded(redis_url) == f"{newer}@master".encode()  # duplicate: no write
    jobs = await queued_jobs(redis_url)
    assert sorted(j.job_id for j in jobs) == sorted(  # type: ignore[type-var]
        [gate_job_id(REPO, 2, HEAD_SHA), gate_job_id(REPO, 2, newer)])  # type: ignore[arg-type]


async def test_closed_records_closed_and_plans_nothing(redis_url: str) -> None:
    async with running_app(settings(redis_url)) as client:
        await post(client, "pull_request", "c-1", _payload("opened"))
        closed = await post(client, "pull_request", "c-2", encode(fixture_json(
            "pull_request.closed.json")))
    assert (closed.status_code, closed.json()) == (200, {"status": "recorded"})
    assert _recorded(redis_url) == b"closed"
    assert len(await queued_jobs(redis_url)) == 1


async def test_reopened_and_ready_for_review_start_fresh_jobs(redis_url: str) -> None:
    async with running_app(settings(redis_url)) as client:
        opened = await post(client, "pull_request", "r-1", _payload("opened", draft=True))
        closed = await post(client, "pull_request", "r-2", encode(fixture_json(
            "pull_request.closed.json")))
        reopened = await post(client, "pull_request", "r-3", _payload("reopened", draft=True))
        ready = await post(client, "pull_request", "r-4", _payload("ready_for_review"))
        synchronize = await post(client, "pull_request", "r-5", _payload("synchronize"))
    assert [r.json()["status"] for r in (opened, closed, reopened, ready, synchronize)] == [
        "queued", "recorded", "queued", "queued", "already_queued"]
    assert _recorded(redis_url) == HEAD_VALUE
    jobs = {j.job_id: j for j in await queued_jobs(redis_url)}
    plain = gate_job_id(REPO, 2, HEAD_SHA)  # type: ignore[arg-type]
    assert sorted(jobs) == sorted([plain, f"{plain}:reopened:r-3",
                                   f"{plain}:ready_for_review:r-4"])
    drafts = {job_id: job.args[0]["draft"] for job_id, job in jobs.items()}
    assert drafts == {plain: True, f"{plain}:reopened:r-3": True,
                      f"{plain}:ready_for_review:r-4": False}
    assert {job.args[0]["base_sha"] for job in jobs.values()} == {BASE_SHA}


async def test_a_head_that_comes_back_gets_a_fresh_run(redis_url: str) -> None:
    """Push A, push B, force-push A: A's first run was superseded by B, so A runs again.

    A second delivery for A while A is still the newest head (an ``opened`` racing a
    ``synchronize``) is still answered ``already_queued``.
    """
    head_b = "b" * 40

    def push(head_sha: str, minute: int) -> bytes:  # real deliveries differ in their bodies
        data = fixture_json("pull_request.synchronize.json")
        data["pull_request"]["head"]["sha"] = head_sha
        data["pull_request"]["updated_at"] = f"2026-11-30T10:{minute:02d}:00Z"
        return encode(data)

    async with running_app(settings(redis_url)) as client:
        first = await post(client, "pull_request", "r-1", _payload("opened"))
        racing = await post(client, "pull_request", "r-2", push(HEAD_SHA, 1))
        moved = await post(client, "pull_request", "r-3", push(head_b, 2))
        back = await post(client, "pull_request", "r-4", push(HEAD_SHA, 3))
        again = await post(client, "pull_request", "r-5", push(HEAD_SHA, 4))
    assert [r.json()["status"] for r in (first, racing, moved, back, again)] == [
        "queued", "already_queued", "queued", "queued", "already_queued"]
    assert _recorded(redis_url) == HEAD_VALUE
    jobs = await queued_jobs(redis_url)
    assert sorted(j.job_id for j in jobs) == sorted([  # type: ignore[type-var]
        gate_job_id(REPO, 2, HEAD_SHA),  # type: ignore[arg-type]
        gate_job_id(REPO, 2, head_b),  # type: ignore[arg-type]
        gate_job_id(REPO, 2, HEAD_SHA, "returned:r-4")])  # type: ignore[arg-type]


async def test_a_new_base_branch_gates_again_other_edits_do_not(redis_url: str) -> None:
    """Case from the field: a PR retargeted from ``main`` to ``release`` kept its verdict and
    comment against ``main``. ``edited`` with ``changes.base`` now queues a fresh run."""
    title = fixture_json("pull_request.edited.DERIVED.json")
    retarget = fixture_json("pull_request.edited.DERIVED.json")
    retarget["changes"] = {"base": {"ref": {"from": "main"}, "sha": {"from": BASE_SHA}}}
    retarget["pull_request"]["base"]["ref"] = "release"
    async with running_app(settings(redis_url)) as client:
        renamed = await post(client, "pull_request", "e-1", encode(title))
        moved = await post(client, "pull_request", "e-2", encode(retarget))
    assert renamed.json() == {
        "status": "ignored",
        "reason": "only a change of the base branch gates an edited pull request again"}
    assert (moved.status_code, moved.json()) == (202, {"status": "queued"})
    [job] = await queued_jobs(redis_url)
    head = retarget["pull_request"]["head"]["sha"]
    number = retarget["pull_request"]["number"]
    assert job.job_id == gate_job_id(REPO, number, head, "edited:e-2")  # type: ignore[arg-type]
    assert job.args[0]["base_ref"] == "release"  # type: ignore[index]
    assert _recorded(redis_url) == f"{head}@release".encode()  # the old run's cue


def _delivery(action: str, head_sha: str, minute: int, base_ref: str = "master") -> bytes:
    """A ``pull_request`` delivery of PR #2 at ``head_sha`` on ``base_ref``; ``minute`` makes
    its body unique (real deliveries differ in their bodies)."""
    name = "edited.DERIVED" if action == "edited" else action
    data = fixture_json(f"pull_request.{name}.json")
    data["pull_request"]["head"]["sha"] = head_sha
    data["pull_request"]["base"]["ref"] = base_ref
    data["pull_request"]["updated_at"] = f"2026-11-30T10:{minute:02d}:00Z"
    if action == "edited":
        data["changes"] = {"base": {"ref": {"from": "master"}, "sha": {"from": BASE_SHA}}}
    return encode(data)


async def test_a_late_delivery_of_the_old_base_leaves_the_retargeted_record(
        redis_url: str) -> None:
    """Retarget A from master to release, then a ``synchronize`` of A on master arrives late
    (GitHub does not promise order): it is ``already_queued`` and the record keeps
    ``A@release``, so the run on master stays superseded. Only the head SHAs decide a
    returned head: push B, then force-push A (both on release), still gets A a fresh run."""
    head_b = "b" * 40
    async with running_app(settings(redis_url)) as client:
        opened = await post(client, "pull_request", "t-1", _delivery("opened", HEAD_SHA, 1))
        moved = await post(client, "pull_request", "t-2",
                           _delivery("edited", HEAD_SHA, 2, "release"))
        late = await post(client, "pull_request", "t-3", _delivery("synchronize", HEAD_SHA, 1))
        assert _recorded(redis_url) == f"{HEAD_SHA}@release".encode()
        pushed = await post(client, "pull_request", "t-4",
                            _delivery("synchronize", head_b, 3, "release"))
        back = await post(client, "pull_request", "t-5",
                          _delivery("synchronize", HEAD_SHA, 4, "release"))
    assert [r.json()["status"] for r in (opened, moved, late, pushed, back)] == [
        "queued", "queued", "already_queued", "queued", "queued"]
    assert _recorded(redis_url) == f"{HEAD_SHA}@release".encode()
    jobs = {j.job_id: j.args[0]["base_ref"] for j in await queued_jobs(redis_url)}
    plain = gate_job_id(REPO, 2, HEAD_SHA)  # type: ignore[arg-type]
    assert jobs == {plain: "master", f"{plain}:edited:t-2": "release",
                    gate_job_id(REPO, 2, head_b): "release",  # type: ignore[arg-type]
                    f"{plain}:returned:t-5": "release"}


async def test_a_bare_sha_record_of_an_older_web_process_still_means_the_same_head(
        redis_url: str) -> None:
    """During a rolling deploy an older web process records a bare head SHA: a racing
    delivery of that head is still ``already_queued`` (no second run), and a push writes the
    new format."""
    newer = "d" * 40
    async with running_app(settings(redis_url)) as client:
        await post(client, "pull_request", "o-1", _delivery("opened", HEAD_SHA, 1))
        old = redis_sync.Redis.from_url(redis_url)
        old.set(HEAD_KEY, HEAD_SHA)  # what the older web process wrote
        old.close()
        racing = await post(client, "pull_request", "o-2", _delivery("synchronize", HEAD_SHA, 2))
        assert racing.json() == {"status": "already_queued"}
        assert _recorded(redis_url) == HEAD_SHA.encode()
        pushed = await post(client, "pull_request", "o-3", _delivery("synchronize", newer, 3))
    assert pushed.json() == {"status": "queued"}
    assert _recorded(redis_url) == f"{newer}@master".encode()
    assert len(await queued_jobs(redis_url)) == 2


async def test_a_record_is_never_replaced_by_an_older_update(redis_url: str) -> None:
    """Field case (fresh-clone tester): after a retarget to ``release``, a ``synchronize`` or
    ``ready_for_review`` of the same head on ``master`` that arrives late (its job id new, so
    it is queued) must not bring the old base back into the record; nor may two ``edited``
    deliveries that arrive swapped. The record keeps the newest ``updated_at``; the late
    runs find the record naming another base and are dropped after GitHub confirms it."""
    async with running_app(settings(redis_url)) as client:
        await post(client, "pull_request", "u-1", _delivery("edited", HEAD_SHA, 5, "release"))
        late = await post(client, "pull_request", "u-2", _delivery("synchronize", HEAD_SHA, 1))
        ready = await post(client, "pull_request", "u-3",
                           _delivery("ready_for_review", HEAD_SHA, 2))
        assert [late.json()["status"], ready.json()["status"]] == ["queued", "queued"]
        assert _get(redis_url, HEAD_KEY)[0] == (
            f"{HEAD_SHA}@release 2026-11-30T10:05:00Z".encode())
        # swapped retargets: back to master (minute 7) arrives before release (minute 6)
        await post(client, "pull_request", "u-4", _delivery("edited", HEAD_SHA, 7, "master"))
        await post(client, "pull_request", "u-5", _delivery("edited", HEAD_SHA, 6, "release"))
        assert _get(redis_url, HEAD_KEY)[0] == f"{HEAD_SHA}@master 2026-11-30T10:07:00Z".encode()
        # the same second cannot be ordered: the later arrival wins, marked `~` (a run it
        # names asks GitHub), and stays marked for the rest of that second, even when a
        # delivery names the same head and base again; a newer second clears the mark
        await post(client, "pull_request", "u-6", _delivery("edited", HEAD_SHA, 7, "release"))
        assert _get(redis_url, HEAD_KEY)[0] == (
            f"{HEAD_SHA}@release 2026-11-30T10:07:00Z~".encode())
        await post(client, "pull_request", "u-6b",
                   _delivery("ready_for_review", HEAD_SHA, 7, "release"))
        assert _get(redis_url, HEAD_KEY)[0] == (
            f"{HEAD_SHA}@release 2026-11-30T10:07:00Z~".encode())
        await post(client, "pull_request", "u-6c", _delivery("edited", HEAD_SHA, 6, "master"))
        assert _recorded(redis_url) == f"{HEAD_SHA}@release".encode()  # older: ignored
        await post(client, "pull_request", "u-6d", _delivery("edited", HEAD_SHA, 8, "release"))
        assert _get(redis_url, HEAD_KEY)[0] == f"{HEAD_SHA}@release 2026-11-30T10:08:00Z".encode()
        # a record without a stamp (an older web process wrote it) is replaced
        old = redis_sync.Redis.from_url(redis_url)
        old.set(HEAD_KEY, HEAD_SHA)  # what an older web process wrote
        old.close()
        await post(client, "pull_request", "u-7", _delivery("edited", HEAD_SHA, 3, "master"))
        assert _get(redis_url, HEAD_KEY)[0] == f"{HEAD_SHA}@master 2026-11-30T10:03:00Z".encode()


async def test_a_close_is_not_undone_by_a_late_delivery(redis_url: str) -> None:
    """Field case (fresh-clone tester): ``closed`` at 10:20, then a ``synchronize`` stamped
    10:10 arrives late: the record stays closed (the late run is dropped once GitHub confirms
    it); a ``reopened`` stamped later does replace it."""
    closed = fixture_json("pull_request.closed.json")
    closed["pull_request"]["number"] = 2
    closed["pull_request"]["updated_at"] = "2026-11-30T10:20:00Z"
    async with running_app(settings(redis_url)) as client:
        await post(client, "pull_request", "c-1", encode(closed))
        assert _get(redis_url, HEAD_KEY)[0] == b"closed 2026-11-30T10:20:00Z"
        late = await post(client, "pull_request", "c-2", _delivery("synchronize", HEAD_SHA, 10))
        assert late.json() == {"status": "queued"}
        assert _get(redis_url, HEAD_KEY)[0] == b"closed 2026-11-30T10:20:00Z"
        await post(client, "pull_request", "c-3", _delivery("reopened", HEAD_SHA, 30))
        assert _recorded(redis_url) == HEAD_VALUE


async def test_a_repeated_body_that_changes_the_record_is_taken_again(redis_url: str) -> None:
    """Issue 30: master -> release -> master -> release -> master within one second sends
    byte-identical ``edited`` bodies (one ``updated_at``). Answering the last one
    ``duplicate`` left the gate on release. De-duplication never drops a body that would
    change the recorded head or base: it is taken again (a fresh job, the record marked
    ``~``), at most `BODY_RETAKES_MAX` times. A body that would change nothing, and any body
    past that, stays a duplicate (a replay)."""
    to_release = _delivery("edited", HEAD_SHA, 7, "release")
    to_master = _delivery("edited", HEAD_SHA, 7, "master")
    flips = [to_release, to_master] * (BODY_RETAKES_MAX + 1)
    async with running_app(settings(redis_url)) as client:
        answers = [(await post(client, "pull_request", f"f-{n}", body)).json()["status"]
                   for n, body in enumerate(flips)]
        assert _get(redis_url, HEAD_KEY)[0] == (
            f"{HEAD_SHA}@master 2026-11-30T10:07:00Z~".encode())
        same = await post(client, "pull_request", "same-1", to_master)  # changes nothing
        spent = await post(client, "pull_request", "spent-1", to_release)  # taken 4 times
    assert answers == ["queued"] * len(flips)
    assert same.json() == spent.json() == {"status": "duplicate"}
    assert _recorded(redis_url) == f"{HEAD_SHA}@master".encode()
    plain = gate_job_id(REPO, 2, HEAD_SHA)  # type: ignore[arg-type]
    jobs = {j.job_id: j.args[0]["base_ref"] for j in await queued_jobs(redis_url)}
    assert jobs == {f"{plain}:edited:f-{n}": "release" if n % 2 == 0 else "master"
                    for n in range(len(flips))}
