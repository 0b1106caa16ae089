"""The field case: a PR is compared with its merge base's baseline, never with main's tip.

(Since issue 30 a head behind main is gated merged into main's tip; here head and m9 rewrite the
same line, so the merge conflicts and the head itself is compared, as this case says.)

"Redis holds a baseline for the PR's base commit `b1` (mean 0.70) and a newer one for the tip of
main `m9` (mean 0.90); head scores 0.71: compared with `b1`, no regression, and the report says
"compared with b1". Without a baseline for `b1`, llmgate runs base itself and stores the result
under `b1`; it never silently uses `m9` or another ancestor."

Real Redis, real git (the worker's mirror and worktrees), the fake GitHub for the installation
token, the worker's own start-up; the suite's pass rate (the mean of per-example passes) is
exactly 0.70 at b1, 0.90 at m9 and 0.71 at head.
"""

from __future__ import annotations

from pathlib import Path

import tests.unit.baseline_support as support
from tests.unit.baseline_support import (
    EXAMPLES,
    build_field_repo,
    command_runs,
    push_payload,
)
from tests.unit.worker_support import INSTALLATION_ID, OWNER, REPO
from worker.baselines.keys import suite_key
from worker.baselines.store import BaselineStore
from worker.gate.evaluate import evaluate
from worker.gate.request import GateRequest
from worker.jobs.push import store_baseline
from worker.pipeline.config_file import read_config
from worker.report import render as report

github, worker_ctx = support.github, support.worker_ctx  # fixtures

KEY = f"{OWNER}/{REPO}"


def pr_request(repo: Path, shas: dict[str, str]) -> GateRequest:
    """PR 5: head on branch ``pr`` (from b1); GitHub's base SHA is main's tip, m9."""
    return GateRequest({"owner": OWNER, "name": REPO, "clone_url": str(repo)}, 5,
                       shas["head"], shas["m9"])


async def test_stored_b1_is_used_not_the_newer_m9(worker_ctx, tmp_path):
    services = worker_ctx["services"]
    repo = tmp_path / "repo"
    shas = build_field_repo(repo)
    for name, pushed_at in (("b1", 1000), ("m9", 2000)):
        done = await store_baseline(worker_ctx, push_payload(str(repo), shas[name], pushed_at))
        assert done["status"] == "stored"
    assert await command_runs(services) == 2 * EXAMPLES  # b1 and m9 each ran once

    gate = await evaluate(services, services.github(INSTALLATION_ID), pr_request(repo, shas))

    assert await command_runs(services) == EXAMPLES  # head only: zero base runs
    assert gate.base_sha == shas["b1"] and gate.base.sha == shas["b1"]
    assert gate.base.suites["score"].metrics["pass_rate"] == 0.70
    assert gate.head.suites["score"].metrics["pass_rate"] == 0.71
    # no regression against b1, but a conflicting head never passes (issue 30): undecided
    assert gate.conclusion == "action_required" and gate.regressions == ()
    [outcome] = [o for o in gate.outcomes if o.rule == "max_drop 0.05"]
    assert (outcome.status, round(outcome.delta, 6)) == ("pass", 0.01)
    assert gate.base_source.startswith(
        f"compared with {shas['b1'][:7]}, the merge base (stored baseline from the push to "
        "main, ")
    assert gate.notes[-1] == gate.base_source
    body = report.comment_body(gate, head_sha=shas["head"], base_sha=shas["m9"])
    assert f"compared with {shas['b1'][:7]}" in body
    # head and m9 both rewrote bot.py's line, so the merge result cannot be gated (issue 30):
    # m9 is named only by the note that says so, never as what was compared
    [conflict] = [n for n in gate.notes if n.startswith("the head conflicts")]
    assert conflict.startswith(f"the head conflicts with the base branch's tip {shas['m9'][:7]},")
    assert shas["m9"][:7] not in body.replace(conflict, "")


async def test_without_b1_base_runs_and_is_stored_under_b1(worker_ctx, tmp_path):
    services = worker_ctx["services"]
    repo = tmp_path / "repo"
    shas = build_field_repo(repo)
    await store_baseline(worker_ctx, push_payload(str(repo), shas["m9"], 2000))
    assert await command_runs(services) == EXAMPLES

    gate = await evaluate(services, services.github(INSTALLATION_ID), pr_request(repo, shas))

    assert await command_runs(services) == 2 * EXAMPLES  # head and base b1, not m9's record
    assert gate.base_sha == shas["b1"]
    assert gate.base.suites["score"].metrics["pass_rate"] == 0.70
    assert gate.conclusion == "action_required"  # the conflict, as above
    assert gate.base_source == (f"compared with {shas['b1'][:7]}, the merge base (base run now, "
                                "stored for later pull requests)")
    store = BaselineStore(services.redis)
    async with services.checkouts.worktree(KEY, str(repo), shas["b1"]) as root:
        config = read_config(root)
        stored = await store.get(KEY, shas["b1"], suite_key(config, config.suites[0], root))
    assert (stored.origin, stored.pr_number, stored.sha) == ("pull_request", 5, shas["b1"])
    assert stored.result == gate.base.suites["score"]

    again = await evaluate(services, services.github(INSTALLATION_ID), pr_request(repo, shas))
    assert await command_runs(services) == EXAMPLES  # the next run of the PR reuses it
    assert again.base_source.startswith(
        f"compared with {shas['b1'][:7]}, the merge base (stored baseline from the base run "
        "of #5, ")
    assert again.base.suites["score"].metrics == gate.base.suites["score"].metrics
