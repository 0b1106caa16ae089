"""``on_paths`` in the gate job: a PR that touches no configured path still gets its check.

A real arq worker in this process, real Redis and git, the schema-checking fake GitHub. The
base (main) restricts the suite to ``prompts/**``; which files a PR changes is what git says
between the merge base and head.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tests.unit.baseline_support as support
from tests.unit.baseline_support import (
    BOT,
    DATASET,
    commit,
    config,
)
from tests.unit.worker_support import gate_payload, git, run_jobs

github = support.github  # fixtures

ON_PATHS = '    on_paths: ["prompts/**"]\n'


def repo_with(tmp_path: Path, settings: str) -> tuple[Path, dict[str, str]]:
    """main restricts the suite to prompts/**; PRs: docs (README only), prompt, config."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    base_config = config(settings, ON_PATHS)
    shas = {"main": commit(repo, "main", {".llmgate.yml": base_config,
                                          "bot.py": BOT.format(passing=90),
                                          "evals/score.jsonl": DATASET,
                                          "prompts/p.txt": "v1\n"}, "base")}
    shas["docs"] = commit(repo, "docs", {"README.md": "docs\n"}, "docs")
    shas["prompt"] = commit(repo, "prompt", {"prompts/p.txt": "v2\n"}, "prompt")
    shas["config"] = commit(repo, "config", {
        ".llmgate.yml": config("  on_paths_conclusion: success\n", ON_PATHS)}, "config")
    return repo, shas


def runs_by_head(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["head_sha"]: r for r in state["check_runs"]}


async def test_a_pr_outside_the_paths_gets_a_success_check_with_the_reason(github, tmp_path):
    repo, shas = repo_with(tmp_path, "")
    await run_jobs([gate_payload(str(repo), shas["docs"], shas["main"], number=1),
                    gate_payload(str(repo), shas["prompt"], shas["main"], number=2)])
    state = github.state()
    runs = runs_by_head(state)
    docs, prompt = runs[shas["docs"]], runs[shas["prompt"]]
    assert (docs["status"], docs["conclusion"]) == ("completed", "success")
    reason = ("suite score skipped: the changed file (README.md) matches none of its on_paths "
              "(prompts/\\*\\*)")  # as markdown
    assert reason in docs["output"]["summary"]
    assert docs["output"]["title"].startswith("llmgate: pass - no suite needed")
    assert (prompt["status"], prompt["conclusion"]) == ("completed", "success")
    assert "score" in prompt["output"]["summary"] and reason not in prompt["output"]["summary"]
    [comment] = [c for c in state["comments"] if c["issue_number"] == 1]
    assert reason in comment["body"]
    assert state["violations"] == []


async def test_the_base_setting_skips_and_a_config_change_runs(github, tmp_path):
    repo, shas = repo_with(tmp_path, "  on_paths_conclusion: skipped\n")
    await run_jobs([gate_payload(str(repo), shas["docs"], shas["main"], number=1),
                    gate_payload(str(repo), shas["config"], shas["main"], number=3)])
    state = github.state()
    runs = runs_by_head(state)
    assert (runs[shas["docs"]]["status"], runs[shas["docs"]]["conclusion"]) == \
        ("completed", "skipped")
    assert "suite score skipped" in runs[shas["docs"]]["output"]["summary"]
    # the head's own `on_paths_conclusion: success` changes nothing; its config change runs all
    changed = runs[shas["config"]]
    assert changed["conclusion"] == "success"
    assert "suite score skipped" not in changed["output"]["summary"]
    assert state["violations"] == []
