"""Which base a PR is compared with: ``settings.base`` (from the base side only), and commits
without a common history. Same repository as the field case: b1 0.70, m9 (main's tip) 0.90,
head (from b1) 0.71."""

from __future__ import annotations

from dataclasses import replace

import tests.unit.baseline_support as support
from tests.unit.baseline_support import (
    BOT,
    DATASET,
    EXAMPLES,
    build_field_repo,
    command_runs,
    commit,
    config,
)
from tests.unit.baselines.test_baseline_field_case import pr_request
from tests.unit.worker_support import INSTALLATION_ID, OWNER, REPO, git
from worker.gate.evaluate import evaluate
from worker.gate.request import GateRequest

github, worker_ctx = support.github, support.worker_ctx  # fixtures


async def test_base_tip_compares_with_the_tip_of_main(worker_ctx, tmp_path):
    services = worker_ctx["services"]
    repo = tmp_path / "repo"
    shas = build_field_repo(repo, config("  base: tip\n"))
    gate = await evaluate(services, services.github(INSTALLATION_ID), pr_request(repo, shas))
    assert gate.base_sha == shas["m9"]
    assert gate.base.suites["score"].metrics["pass_rate"] == 0.90
    assert gate.conclusion == "failure"  # 0.71 against 0.90 drops more than 0.05
    assert gate.base_source == (f"compared with {shas['m9'][:7]}, the base branch's tip, as "
                                "settings.base: tip says (base run now, stored for later pull "
                                "requests)")


async def test_a_head_cannot_choose_its_base(worker_ctx, tmp_path):
    services = worker_ctx["services"]
    repo = tmp_path / "repo"
    shas = build_field_repo(repo)
    shas["head"] = commit(repo, "pr", {".llmgate.yml": config("  base: tip\n")}, "tip please",
                          start="pr")
    gate = await evaluate(services, services.github(INSTALLATION_ID), pr_request(repo, shas))
    assert gate.base_sha == shas["b1"]
    assert gate.base.suites["score"].metrics["pass_rate"] == 0.70
    assert gate.head.suites["score"].metrics["pass_rate"] == 0.71


async def test_unrelated_histories_fall_back_to_the_given_base(worker_ctx, tmp_path):
    services = worker_ctx["services"]
    repo = tmp_path / "repo"
    shas = build_field_repo(repo)
    git(repo, "switch", "-q", "--orphan", "lonely")
    for name, text in {".llmgate.yml": config(), "bot.py": BOT.format(passing=88),
                       "evals/score.jsonl": DATASET}.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "lonely")
    lonely = git(repo, "rev-parse", "HEAD")
    git(repo, "switch", "-q", "-f", "main")
    request = GateRequest({"owner": OWNER, "name": REPO, "clone_url": str(repo)}, 6, lonely,
                          shas["m9"])
    gate = await evaluate(services, services.github(INSTALLATION_ID), request)
    assert gate.base_sha == shas["m9"]
    assert gate.notes[0] == (f"{shas['m9'][:7]} and {lonely[:7]} share no history: compared "
                             "with the base branch's tip")
    assert gate.base.suites["score"].metrics["pass_rate"] == 0.90
    assert await command_runs(services) == 2 * EXAMPLES


async def test_a_no_cache_rerun_runs_base_again_and_stores_it(worker_ctx, tmp_path):
    services = worker_ctx["services"]
    repo = tmp_path / "repo"
    shas = build_field_repo(repo)
    first = await evaluate(services, services.github(INSTALLATION_ID), pr_request(repo, shas))
    assert first.base_source.endswith("(base run now, stored for later pull requests)")
    assert await command_runs(services) == 2 * EXAMPLES
    fresh = replace(pr_request(repo, shas), no_cache=True)  # /llmgate rerun --no-cache
    again = await evaluate(services, services.github(INSTALLATION_ID), fresh)
    assert await command_runs(services) == 2 * EXAMPLES
    assert again.base_source == first.base_source
    reused = await evaluate(services, services.github(INSTALLATION_ID), pr_request(repo, shas))
    assert await command_runs(services) == EXAMPLES
    assert "(stored baseline from the base run of #5, " in reused.base_source
