"""``llmgate init`` and ``llmgate dataset check|import|add`` through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.unit.worker_support import git
from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_GATE_FAILED, EXIT_PASS, main
from worker.version import VERSION


@pytest.fixture()
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_init_writes_a_config_that_runs_and_passes(here, capsys):
    assert main(["init", "--ci", "github"]) == EXIT_PASS
    workflow = yaml.safe_load((here / ".github/workflows/llmgate.yml").read_text())
    # the Action at this release's tag installs and runs llmgate (never `pip install llmgate`)
    gate = workflow["jobs"]["gate"]["steps"][-1]
    assert gate["uses"] == f"OWNER/llmgate/deploy/github-action@v{VERSION}"
    assert gate["with"] == {"baseline-store": "git"} and "env" not in gate
    assert not any("run" in step for step in workflow["jobs"]["gate"]["steps"])
    assert "llmgate: wrote .llmgate.yml" in capsys.readouterr().out
    assert main(["run", "--format", "json"]) == EXIT_PASS
    report = json.loads(capsys.readouterr().out)
    assert (report["conclusion"], report["metrics"]["starter"]["head"]["pass_rate"]) == (
        "success", 1.0)
    assert main(["init"]) == EXIT_CONFIG_ERROR  # files exist: nothing overwritten
    assert "already exist; nothing written" in capsys.readouterr().err


def test_init_for_a_model_target_and_gitlab(here):
    assert main(["init", "--target", "model", "--model", "openai/gpt-4o-mini",
                 "--api-key-env", "MY_KEY", "--ci", "gitlab"]) == EXIT_PASS
    config = yaml.safe_load((here / ".llmgate.yml").read_text())
    assert config["suites"][0]["target"] == {"model": "openai/gpt-4o-mini",
                                             "api_key_env": "MY_KEY",
                                             "prompt": "prompts/starter.txt"}
    assert "llmgate run" in " ".join(yaml.safe_load(
        (here / ".gitlab-ci.llmgate.yml").read_text())["llmgate"]["script"])
    from worker.evals.config.load import parse_config
    assert parse_config((here / ".llmgate.yml").read_text()).suites[0].name == "starter"


def test_init_for_a_model_target_on_github_passes_its_key_to_the_action(here):
    assert main(["init", "--target", "model", "--api-key-env", "MY_KEY"]) == EXIT_PASS
    workflow = yaml.safe_load((here / ".github/workflows/llmgate.yml").read_text())
    [gate] = [step for step in workflow["jobs"]["gate"]["steps"]
              if "github-action" in step.get("uses", "")]
    assert gate["env"] == {"MY_KEY": "${{ secrets.MY_KEY }}"}


def test_dataset_check_reports_what_the_gate_cannot_use(here, capsys):
    rows = [{"id": "a", "input": "x", "expected": "yes"}, {"input": "x", "expected": "yes"},
            *({"id": f"k{n}", "input": f"q{n}", "expected": "yes",
               "assert": [{"type": "equals"}]} for n in range(4))]
    (here / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["dataset", "check", "d.jsonl"]) == EXIT_GATE_FAILED
    out = capsys.readouterr().out
    assert "d.jsonl:line 2: example '2' has the same input as line 1" in out
    assert "d.jsonl:line 2: no id" in out
    assert "d.jsonl:line 1: example 'a' has no assertion: it cannot fail" in out
    assert "label balance: 6 of 6 examples expect \"yes\"" in out
    (here / "bad.jsonl").write_text('{"input": "x"}\n{"inpt": 1}\n')
    assert main(["dataset", "check", "bad.jsonl"]) == EXIT_CONFIG_ERROR
    assert "bad.jsonl:2" in capsys.readouterr().err


def test_dataset_import_and_add(here, capsys):
    (here / "t.csv").write_text("ticket,question,label\nt1,Hello,greeting\n")
    assert main(["dataset", "import", "--from", "t.csv", "--to", "t.jsonl",
                 "--column", "id=ticket", "--column", "input=question",
                 "--column", "expected=label"]) == EXIT_PASS
    assert main(["dataset", "add", "t.jsonl", "--id", "t2", "--input", "Bye",
                 "--contains", "bye"]) == EXIT_PASS
    assert main(["dataset", "add", "t.jsonl", "--id", "t2", "--input", "Again"]) == \
        EXIT_CONFIG_ERROR
    rows = [json.loads(line) for line in (here / "t.jsonl").read_text().splitlines()]
    assert rows == [{"id": "t1", "input": "Hello", "expected": "greeting"},
                    {"id": "t2", "input": "Bye",
                     "assert": [{"type": "contains", "value": "bye"}]}]
    assert main(["dataset", "check", "t.jsonl"]) == EXIT_GATE_FAILED  # t1 has no assertion


def test_init_in_a_folder_writes_the_workflow_where_github_reads_it(here, monkeypatch, capsys):
    """Issue 33's fresh user: in a service folder, init wrote services/bot/.github/workflows/,
    which GitHub never reads; the config and dataset stay in the folder."""
    folder = here / "services" / "bot"
    folder.mkdir(parents=True)
    monkeypatch.chdir(folder)
    assert main(["init", "--ci", "github"]) == EXIT_PASS
    assert (here / ".github/workflows/llmgate.yml").is_file()
    assert not (folder / ".github").exists()
    assert (folder / ".llmgate.yml").is_file() and not (here / ".llmgate.yml").exists()
    out = capsys.readouterr().out
    assert ("llmgate: wrote ../../.github/workflows/llmgate.yml (at the repository's root: CI "
            "reads it only there)") in out
    assert main(["init", "--ci", "github"]) == EXIT_CONFIG_ERROR  # the root's workflow counts
    assert "../../.github/workflows/llmgate.yml" in capsys.readouterr().err


def test_init_for_gitlab_says_how_to_include_the_job_and_what_to_set(here, capsys):
    assert main(["init", "--target", "model", "--api-key-env", "MY_KEY", "--ci", "gitlab"]) \
        == EXIT_PASS
    steps = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("llmgate: next: ")]
    assert steps == [
        "llmgate: next: `llmgate run` (then commit the files)",
        "llmgate: next: include the job from your .gitlab-ci.yml: `include: [{local: "
        ".gitlab-ci.llmgate.yml}]`",
        "llmgate: next: set LLMGATE_COMMIT (the commit of LLMGATE_TAG, 40 hex) and OWNER in "
        "LLMGATE_REPOSITORY, in the file or as CI/CD variables",
        "llmgate: next: add the masked CI/CD variable MY_KEY (Settings > CI/CD > Variables)"]
