"""After an end-to-end gate run, ``/metrics`` shows every series operators need, with the exact
counts of what happened, and the worker's JSON logs carry the job's identifiers.

Real processes (redis-server, the fake GitHub, the web process, one worker): the worker's
counts reach the web process only through Redis, which is the design under test.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.ops_support import EXAMPLES, OWNER, REPO, build_repo, open_pr, wait_until
from worker.cli.demo import Stack

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One stack that has gated a PR, plus a ping and a forged delivery."""
    work = tmp_path_factory.mktemp("metrics")
    shas = build_repo(work / "repo")
    mp = pytest.MonkeyPatch()
    mp.setenv("LLMGATE_LOG_FORMAT", "json")  # inherited by the web process and the worker
    try:
        with Stack(work, workers=1) as stack:
            payload = open_pr(stack, shas, (work / "repo").as_uri(), "pr/quick", 1)
            assert stack.deliver("pull_request", payload, delivery_id="d-1").status_code == 202
            assert stack.deliver("ping", {"zen": "Keep it logically awesome."}).status_code == 200
            assert stack.deliver("pull_request", payload, secret="wrong").status_code == 401
            stack.wait_for_check(shas["pr/quick"])
            yield {"stack": stack, "shas": shas, "work": work,
                   "metrics": _settled_metrics(stack)}
    finally:
        mp.undo()


def _settled_metrics(stack: Stack, timeout_s: float = 30) -> dict[tuple[str, tuple], float]:
    """Scrape until the job's own counters are in and the queue is empty.

    The worker flushes the job's counters as the job function returns; arq removes the job
    from ``arq:queue`` (where a running job stays) a moment later, which a loaded machine can
    stretch (CI saw ``llmgate_jobs_queued`` 1 after the counters were in). A sweeper cron job
    can also sit in the queue for a moment.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        samples = scrape(stack)
        done = ("llmgate_jobs_total",
                (("function", "gate_pull_request"), ("outcome", "completed")))
        if (samples.get(done) == 1 and samples.get(("llmgate_jobs_queued", ())) == 0) \
                or time.monotonic() > deadline:
            return samples
        time.sleep(0.2)


def scrape(stack: Stack) -> dict[tuple[str, tuple], float]:
    """GET /metrics and return {(sample name, sorted labels): value}."""
    resp = httpx.get(f"{stack.web_url}/metrics", timeout=5)
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(resp.text) for s in family.samples}


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_webhooks_are_counted_by_event_and_outcome(run):
    m = run["metrics"]
    assert value(m, "llmgate_webhooks_received_total", event="pull_request", outcome="queued") == 1
    assert value(m, "llmgate_webhooks_received_total", event="ping", outcome="pong") == 1
    assert value(m, "llmgate_webhooks_received_total", event="-", outcome="rejected_401") == 1


def test_jobs_queued_running_failed_and_their_duration(run):
    m = run["metrics"]
    assert value(m, "llmgate_jobs_total", function="gate_pull_request", outcome="completed") == 1
    assert not any(k[0] == "llmgate_jobs_total" and ("outcome", "failed") in k[1] for k in m)
    assert value(m, "llmgate_jobs_queued") == 0
    assert value(m, "llmgate_jobs_running") == 0
    assert value(m, "llmgate_workers") == 1
    assert value(m, "llmgate_redis_up") == 1
    count = value(m, "llmgate_job_duration_seconds_count", function="gate_pull_request")
    total_s = value(m, "llmgate_job_duration_seconds_sum", function="gate_pull_request")
    assert count == 1 and 0 < total_s < 600
    assert value(m, "llmgate_job_duration_seconds_bucket", function="gate_pull_request",
                 le="+Inf") == 1
    assert value(m, "llmgate_job_duration_seconds_bucket", function="gate_pull_request",
                 le="3600.0") == 1
    assert value(m, "llmgate_gate_conclusions_total", conclusion="success") == 1


def test_provider_calls_cache_hits_and_cost(run):
    m = run["metrics"]
    calls = 2 * len(EXAMPLES)  # every example once at base and once at head
    assert value(m, "llmgate_provider_calls_total", kind="command",
                 provider="none") == calls
    assert value(m, "llmgate_provider_cache_hits_total", kind="command",
                 provider="none") == 0
    assert value(m, "llmgate_cost_usd_total", kind="command",
                 provider="none") == 0  # the target reports none


def test_github_api_calls_and_rate_limit_match_what_github_saw(run):
    m = run["metrics"]
    requests = run["stack"].state()["requests"]
    seen = Counter((r["method"], str(r["status"])) for r in requests)
    counted = {(dict(labels)["method"], dict(labels)["status"]): v
               for (name, labels), v in m.items() if name == "llmgate_github_api_calls_total"}
    assert counted == dict(seen)
    # the fake answers x-ratelimit-remaining = 5000 - requests so far; the last one wins
    assert value(m, "llmgate_github_rate_limit_remaining", installation="1",
                 resource="core") == 5000 - len(requests)


def test_readyz_reports_an_empty_queue_and_the_worker(run):
    url = f"{run['stack'].web_url}/readyz"
    # a sweeper cron job may be in the queue for a moment (see _settled_metrics)
    wait_until(lambda: httpx.get(url, timeout=5).json().get("queued") == 0, 10,
               "/readyz did not show an empty queue")
    resp = httpx.get(url, timeout=5)
    assert resp.status_code == 200
    assert resp.json() == {"status": "ready", "queued": 0, "max_queued": 1000, "workers": 1}


def test_worker_logs_are_json_lines_with_the_job_identifiers(run):
    lines = [json.loads(line) for line in
             (Path(run["work"]) / "worker-0.log").read_text().splitlines()
             if line.startswith("{")]
    in_job = [entry for entry in lines if entry.get("job_id", "").startswith("gate:")]
    assert in_job, "no log line carried the job id"
    for entry in in_job:
        assert entry["delivery_id"] == "d-1"
        assert entry["repository"] == f"{OWNER}/{REPO}" and entry["pr"] == 1
        assert {"ts", "level", "logger", "message"} <= set(entry)
