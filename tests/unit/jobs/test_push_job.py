"""The push job: a push to the default branch runs the suites and stores the baseline.

A real arq worker (burst mode, this process) or the job called with the worker's own context,
real Redis and git, the fake GitHub for the installation token.
"""

from __future__ import annotations

from arq import create_pool
from arq.jobs import Job
from arq.worker import create_worker

import tests.unit.baseline_support as support
from tests.unit.baseline_support import (
    EXAMPLES,
    build_field_repo,
    command_runs,
    commit,
    config,
    push_payload,
)
from tests.unit.worker_support import OWNER, REPO
from worker.baselines.keys import suite_key
from worker.baselines.store import BaselineStore, latest_key, record_key
from worker.contract import baseline_job_id
from worker.jobs.push import store_baseline
from worker.main import shutdown, startup, worker_settings
from worker.pipeline.config_file import read_config

github, worker_ctx = support.github, support.worker_ctx  # fixtures

KEY = f"{OWNER}/{REPO}"


async def test_the_registered_job_stores_the_baseline_and_marks_it_latest(github, tmp_path):
    repo = tmp_path / "repo"
    shas = build_field_repo(repo)
    payload = push_payload(str(repo), shas["m9"], 2000)
    settings = worker_settings()
    pool = await create_pool(settings.redis_settings)
    job = await pool.enqueue_job("store_baseline", payload,
                                 _job_id=baseline_job_id(payload["repo"], shas["m9"]))
    assert job is not None
    worker = create_worker(settings, burst=True, poll_delay=0.05, handle_signals=False,
                           cron_jobs=[])  # no sweeper cron: it would count as a job
    await worker.async_run()
    await worker.close()
    result = await Job(job.job_id, pool).result(timeout=5)
    assert result["status"] == "stored" and result["sha"] == shas["m9"]
    assert result["base_source"] == (f"compared with {shas['m9'][:7]} (base run now, stored "
                                     "for later pull requests)")
    store = BaselineStore(pool)
    pointer = await store.latest(KEY, "main")
    assert (pointer["sha"], pointer["pushed_at"]) == (shas["m9"], 2000)
    [record] = pointer["keys"]
    assert record.startswith(f"llmgate:baseline:{KEY}:{shas['m9']}:")
    assert await pool.ttl(record) == -1  # the latest push never expires
    assert await pool.ttl(latest_key(KEY, "main")) == -1
    await pool.aclose()


async def test_a_later_push_replaces_the_latest_and_repeats_run_nothing(worker_ctx, tmp_path):
    services = worker_ctx["services"]
    repo = tmp_path / "repo"
    shas = build_field_repo(repo)
    first = await store_baseline(worker_ctx, push_payload(str(repo), shas["b1"], 1000))
    assert first["status"] == "stored" and await command_runs(services) == EXAMPLES
    again = await store_baseline(worker_ctx, push_payload(str(repo), shas["b1"], 1000))
    assert await command_runs(services) == 0  # a retried job reuses what it stored
    assert again["base_source"].startswith(
        f"compared with {shas['b1'][:7]} (stored baseline from the push to main, ")
    await store_baseline(worker_ctx, push_payload(str(repo), shas["m9"], 2000))
    store = BaselineStore(services.redis)
    assert (await store.latest(KEY, "main"))["sha"] == shas["m9"]
    async with services.checkouts.worktree(KEY, str(repo), shas["b1"]) as root:
        conf = read_config(root)
        key = suite_key(conf, conf.suites[0], root)
    stored = await store.get(KEY, shas["b1"], key)
    assert stored.result.metrics["pass_rate"] == 0.70
    assert (stored.origin, stored.branch) == ("push", "main")
    ttl = await services.redis.ttl(record_key(KEY, shas["b1"], key))
    assert 0 < ttl <= 30 * 24 * 3600  # the replaced latest expires again


async def test_a_broken_or_missing_config_stores_nothing(worker_ctx, tmp_path):
    services = worker_ctx["services"]
    repo = tmp_path / "repo"
    build_field_repo(repo)
    broken = commit(repo, "main", {".llmgate.yml": config().replace("type: equals",
                                                                    "type: equalz")}, "broken")
    half = commit(repo, "main", {".llmgate.yml": "version: 1\n"}, "half")
    gone = commit(repo, "main", {".llmgate.yml": None}, "gone")
    done = await store_baseline(worker_ctx, push_payload(str(repo), broken, 3000))
    assert done["status"] == "config_error"
    assert done["reason"].startswith(".llmgate.yml:11: unknown assertion type 'equalz' (known")
    assert (await store_baseline(worker_ctx, push_payload(str(repo), half, 3100)))["reason"] == \
        ".llmgate.yml:1: the config is missing `suites`"
    assert await store_baseline(worker_ctx, push_payload(str(repo), gone, 3200)) == \
        {"status": "no_config", "sha": gone}
    assert await services.redis.keys("llmgate:baseline*") == []
    assert await command_runs(services) == 0


async def test_baseline_settings_are_the_ones_read_at_start_up(github, tmp_path, monkeypatch):
    """``LLMGATE_BASELINE_*`` is read once, when the worker starts, and carried by its services:
    a later change of the environment reaches no job (a job reading it would fail on it)."""
    monkeypatch.setenv("LLMGATE_BASELINE_TTL_S", "7200")
    ctx: dict = {}
    await startup(ctx)
    try:
        monkeypatch.setenv("LLMGATE_BASELINE_TTL_S", "1d")  # malformed
        repo = tmp_path / "repo"
        shas = build_field_repo(repo)
        await store_baseline(ctx, push_payload(str(repo), shas["b1"], 1000))
        result = await store_baseline(ctx, push_payload(str(repo), shas["m9"], 2000))
        assert result["status"] == "stored"
        redis = ctx["services"].redis
        [old] = [k async for k in redis.scan_iter(f"llmgate:baseline:{KEY}:{shas['b1']}:*")]
        assert 7000 < await redis.ttl(old) <= 7200  # the replaced latest expires as started
    finally:
        await shutdown(ctx)


async def test_start_up_does_not_import_litellm(github, monkeypatch):
    """A worker whose gates call no model through litellm never pays its import (seconds of
    CPU, ~200 MB): start-up does not import it; the first call that needs it does, in a
    thread (tests/unit/evals/llm/test_llm_import.py)."""
    from worker.evals.llm import client

    imported: list[str] = []
    monkeypatch.setattr(client, "_litellm", None)
    monkeypatch.setattr(client, "_import_litellm", lambda: imported.append("litellm"))
    ctx: dict = {}
    await startup(ctx)
    try:
        assert imported == []
    finally:
        await shutdown(ctx)
