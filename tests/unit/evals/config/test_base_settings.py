"""Head runs under base's settings: budgets, time limits, tolerances and the environment."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest

from tests.unit.worker_support import write_tickets_tree
from worker.evals.config.base_settings import FROM_BASE, with_base_settings
from worker.evals.config.load import parse_config
from worker.evals.types import Endpoint, RetrySettings, Settings
from worker.pipeline.trees import gate_trees

CONFIG = parse_config("""\
version: 1
suites:
  - name: s
    dataset: d.jsonl
    target: {command: "bot {input_file} {output_file}"}
""")
HEAD = Settings(timeout_s=0.001, concurrency=64, env=("PR_SECRET",), repeats=1, cache=False,
                max_cost_usd=0.000001, max_duration_s=0.5, retry=RetrySettings(0, 0, 0),
                max_provider_error_rate=1.0, max_judge_error_rate=1.0,
                estimate_output_tokens=100000, undecided="neutral",
                judge=Endpoint("openai/head-judge"), drafts="skip")


def test_every_field_that_bounds_a_run_or_decides_it_comes_from_base() -> None:
    base = replace(CONFIG, settings=Settings(judge=Endpoint("openai/base-judge")))
    head = replace(CONFIG, settings=HEAD)
    merged, [note] = with_base_settings(base, head)
    for name in FROM_BASE:
        assert getattr(merged.settings, name) == getattr(base.settings, name), name
    assert merged.settings.judge == HEAD.judge  # scoring: base is re-scored with it
    assert merged.settings.drafts == "skip"  # read from base elsewhere (worker/gate/drafts.py)
    assert note == (
        "head's run used base's settings, not its own (settings.timeout 0.001 -> 60; "
        "settings.concurrency 64 -> 4; settings.env [PR_SECRET] -> []; settings.cache False "
        "-> True; settings.max_cost_usd 1e-06 -> none; settings.max_duration 0.5 -> none; "
        "settings.retry {max_retries: 0, backoff_base: 0, max_backoff: 0} -> "
        "{max_retries: 2, backoff_base: 0.5, max_backoff: 60}; "
        "settings.max_provider_error_rate 1 -> 0.1; settings.max_judge_error_rate 1 -> 0.1; "
        "settings.estimate_output_tokens 100000 -> 256; settings.undecided neutral -> "
        "action_required, head -> base): a pull request's own limits apply once it is merged")
    decided = {f.name for f in fields(Settings)} - set(FROM_BASE)
    assert decided == {"judge", "embedding", "base", "on_paths_conclusion", "drafts", "checks",
                       "statistics"}


def test_without_a_base_config_heads_settings_apply() -> None:
    head = replace(CONFIG, settings=HEAD)
    assert with_base_settings(None, head) == (head, [])
    assert with_base_settings(head, head) == (head, [])


SHOW_ENV = """import json, os, sys
json.dump({"output": os.environ.get("PR_SECRET", "none")}, open(sys.argv[2], "w"))
"""


async def test_a_head_cannot_pass_more_of_the_workers_environment_to_its_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pull request's command target saw a worker variable the PR itself listed in
    ``settings.env``; now only base's list applies."""
    monkeypatch.setenv("PR_SECRET", "hunter2-worker-value")
    rows = [{"id": "a", "input": "x", "expected": "none"}]
    gate = "      pass_rate: {min: 1.0}\n"
    base = write_tickets_tree(tmp_path / "base", rows, SHOW_ENV, gate)
    head = write_tickets_tree(tmp_path / "head", rows, SHOW_ENV, gate)
    text = (head / ".llmgate.yml").read_text()
    (head / ".llmgate.yml").write_text(text.replace("suites:", "settings: {env: [PR_SECRET]}\n"
                                                               "suites:"))
    report = await gate_trees(head, base)
    assert report.head is not None
    assert [e.output for e in report.head.suites["tickets"].examples] == ["none"]
    assert report.conclusion == "success"
    assert any("settings.env [PR_SECRET] -> []" in n for n in report.notes)
