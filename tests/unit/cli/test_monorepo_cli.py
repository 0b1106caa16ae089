"""Several configs outside the worker: ``llmgate run`` gates every config as the worker does,
and GitHub's Re-run of a config's own check run (``llmgate: <folder>``) reaches the worker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.app_support import encode, fixture_json, post, queued_jobs, running_app, settings
from tests.unit.monorepo_support import build_monorepo
from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_GATE_FAILED, EXIT_PASS, main


@pytest.fixture(scope="module")
def monorepo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("cli") / "mono"
    return repo, build_monorepo(repo)


def run_cli(capsys: pytest.CaptureFixture[str], repo: Path, *args: str) -> tuple[int, str, str]:
    code = main(["run", "--no-cache", "--repo", str(repo), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_run_gates_every_config_and_fails_on_one_service(monorepo, capsys) -> None:
    repo, _ = monorepo
    code, out, err = run_cli(capsys, repo, "--base", "main", "--head", "pr/a-drop")
    assert (code, err) == (EXIT_GATE_FAILED, "")
    assert out.startswith("### ❌ llmgate: fail\n") and "<!-- llmgate -->" not in out
    assert "| services/a/.llmgate.yml | ❌ fail, 1 regression" in out
    assert "### ✅ services/b/.llmgate.yml: pass" in out and "/llmgate rerun" not in out


def test_run_config_of_one_folder_runs_in_that_folder(monorepo, capsys) -> None:
    repo, _ = monorepo
    code, out, _ = run_cli(capsys, repo, "--base", "main", "--head", "pr/a-drop", "--config",
                           "services/a/.llmgate.yml", "--format", "json")
    doc = json.loads(out)
    assert (code, [c["path"] for c in doc["configs"]]) == (EXIT_GATE_FAILED,
                                                            ["services/a/.llmgate.yml"])
    [worse] = doc["configs"][0]["report"]["regressions"]
    assert (worse["dataset"], worse["line"], worse["example_id"]) == (
        "services/a/evals/echo.jsonl", 2, "bravo")


@pytest.mark.parametrize("where", ["folder", "absolute", "folder name"])
def test_config_is_a_path_from_the_current_folder_or_absolute(monorepo, monkeypatch, capsys,
                                                             where) -> None:
    """Field case (fresh-clone tester): ``--config /abs/services/a/.llmgate.yml`` looked for
    the datasets at the repository root ("file not found"); ``--config .llmgate.yml`` inside
    ``services/a`` gated every config. Both name ``services/a/.llmgate.yml`` now, and so does
    the folder's name, as in ``configs:``."""
    repo, _ = monorepo
    config = repo / "services" / "a" / ".llmgate.yml"
    monkeypatch.chdir(config.parent if where == "folder" else repo)
    named = {"folder": ".llmgate.yml", "absolute": str(config), "folder name": "services/a"}
    code = main(["run", "--no-cache", "--base", "main", "--head", "pr/a-drop", "--format",
                 "json", "--config", named[where]])
    doc = json.loads(capsys.readouterr().out)
    assert (code, [c["path"] for c in doc["configs"]]) == (EXIT_GATE_FAILED,
                                                            ["services/a/.llmgate.yml"])
    [worse] = doc["configs"][0]["report"]["regressions"]
    assert (worse["dataset"], worse["line"]) == ("services/a/evals/echo.jsonl", 2)


def test_run_json_has_one_report_per_config(monorepo, capsys) -> None:
    repo, _ = monorepo
    code, out, _ = run_cli(capsys, repo, "--base", "main", "--head", "pr/new-c",
                           "--format", "json")
    doc = json.loads(out)
    assert (code, doc["conclusion"]) == (EXIT_PASS, "success")
    assert [(c["path"], c["report"]["conclusion"]) for c in doc["configs"]] == [
        ("services/a/.llmgate.yml", "success"), ("services/b/.llmgate.yml", "success"),
        ("services/c/.llmgate.yml", "success")]
    assert "no services/c/.llmgate.yml at base: relative rules skipped" in \
        doc["configs"][2]["report"]["notes"]


def test_run_exits_2_on_a_bad_list_entry_and_names_its_line(monorepo, capsys) -> None:
    repo, _ = monorepo
    code, _, err = run_cli(capsys, repo, "--base", "main", "--head", "pr/outside")
    assert code == EXIT_CONFIG_ERROR
    assert err == ("llmgate: configuration error: .llmgate.yml:7: `configs`: '../outside' "
                   "must be a relative POSIX path inside the repository\n")


def _rerequested(name: str) -> dict[str, Any]:
    data = fixture_json("check_run.rerequested.json")
    data["check_run"].update(name=name, external_id="pr:12")
    data["check_run"]["app"]["id"] = 4242
    return data


@pytest.mark.parametrize(("name", "queued"), [
    ("llmgate: services/a", True), ("llmgate:x", False), ("llmgate-other", False)])
async def test_rerun_of_a_config_check_run_rechecks_its_pull_request(
        redis_url: str, name: str, queued: bool) -> None:
    async with running_app(settings(redis_url)) as client:
        answer = await post(client, "check_run", f"d-{len(name)}", encode(_rerequested(name)))
    jobs = await queued_jobs(redis_url)
    if not queued:
        assert (answer.status_code, jobs) == (200, [])
        assert answer.json() == {"status": "ignored", "reason": "not an llmgate check run"}
        return
    assert answer.status_code == 202
    [job] = jobs
    assert (job.function, job.args[0]["pr_numbers"]) == ("rerun_check", [12])
