"""The GitHub Action's gate step (deploy/github-action/gate.sh) end to end: the summary, the
annotations, the cache folder (tests/unit/cli/action_support.py runs it as Actions does)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.fake_llm import running_fake_llm
from tests.unit.cli.action_support import (
    read_outputs,
    run_gate_step,
)
from tests.unit.llm_support import KEY_ENV
from tests.unit.worker_support import (
    CONFIG,
    build_tiny_repo,
    commit,
)


@pytest.mark.slow
def test_gate_step_writes_summary_and_annotations_and_fails_the_job(tmp_path: Path):
    repo = tmp_path / "repo"
    shas = build_tiny_repo(repo)
    summary = tmp_path / "summary.md"
    done = run_gate_step(tmp_path, repo, shas["main"], shas["pr/drop"],
                         LLMGATE_BASELINE_STORE=str(tmp_path / "baselines"))
    assert done.returncode == 1, done.stderr
    [annotation] = [line for line in done.stdout.splitlines() if line.startswith("::error")]
    assert annotation.startswith("::error file=evals/echo.jsonl,line=2,title=llmgate%3A echo::"
                                 "bravo: ")
    text = summary.read_text()
    report = json.loads((tmp_path / "llmgate-report.json").read_text())
    why = report["why"]
    assert why.startswith("decided by echo pass_rate max_drop 0.05 (fail)")
    # the summary opens with the verdict and the Why sentence
    assert text.startswith(f"earlier step\n### llmgate: failure\n\n**Why:** {why}\n\n")
    assert "| echo | 1.00 | 0.75 |" in text
    assert list((tmp_path / "baselines").rglob("*.rec"))  # the base was stored for next time
    outputs = read_outputs(tmp_path / "output.txt")
    assert outputs == {"conclusion": "failure", "exit-code": "1", "why": why,
                       "report-json": str(tmp_path / "llmgate-report.json"),
                       "report-junit": str(tmp_path / "llmgate-junit.xml"),
                       "report-html": str(tmp_path / "llmgate-report.html")}
    junit = Path(outputs["report-junit"]).read_text()
    assert 'type="regression"' in junit and f'name="why" value="{why}"' in junit
    assert "<strong>Why:</strong>" in Path(outputs["report-html"]).read_text()


@pytest.mark.slow
def test_the_action_keeps_the_cache_in_the_jobs_own_temporary_folder(tmp_path: Path):
    """Issue 30: ``~/.cache/llmgate`` outlives a job on a self-hosted runner, where the next
    pull request's job would read what this one wrote; ``RUNNER_TEMP`` is emptied between
    jobs."""
    repo = tmp_path / "repo"
    build_tiny_repo(repo)
    with running_fake_llm({"default_reply": "echo"}) as llm:  # answers cached: a cache write
        model = (f'{{model: openai/test-model, api_base: "{llm.url}", api_key_env: '
                 f'{KEY_ENV}, prompt: prompts/p.txt}}')
        suite = (f"  - name: model\n    dataset: evals/echo.jsonl\n    target: {model}\n"
                 "    assertions: [{type: contains, value: echo}]\n")
        files: dict[str, str | None] = {".llmgate.yml": CONFIG + suite,
                                        "prompts/p.txt": "Say: {{ input }}"}
        base = commit(repo, "model-main", files, "a model suite")
        head = commit(repo, "model-docs", {"README.md": "An echo bot.\n"}, start="model-main")
        done = run_gate_step(tmp_path, repo, base, head, LLMGATE_CACHE_DIR="",
                             **{KEY_ENV: "sk-fake"})
        assert done.returncode == 0, done.stderr
        assert llm.calls()  # the model suite was answered by the server, then cached
    assert (tmp_path / "llmgate-cache" / "responses.sqlite3").is_file()
    assert not (tmp_path / ".cache").exists()  # HOME's
