"""The GitHub Action's definition and its quick steps (deploy/github-action): workflow commands
and outputs, the install step's refusals and wheels, and the GitLab template. The slow halves
are apart, so that pytest-xdist's ``--dist loadfile`` runs them side by side (issue 34): the
install from a checkout or a git ref (test_github_action_install.py), the gate step
(test_github_action_gate.py) and the sticky comment (test_github_action_comment.py); what they
share is tests/unit/cli/action_support.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.unit import worker_support
from tests.unit.cli.action_support import (
    ACTION,
    ROOT,
    action_step,
    fake_wheel,
    gitlab_install,
    read_outputs,
    run_action_step,
)
from tests.unit.worker_support import (
    commit,
)
from worker.cli.action import escape, workflow_annotations
from worker.cli.action_outputs import OUTPUT_NAMES, write_outputs
from worker.version import VERSION


def test_workflow_command_escaping():
    assert escape("50%\nnext") == "50%25%0Anext"
    assert escape("a:b,c", prop=True) == "a%3Ab%2Cc"
    assert workflow_annotations({"config_error": {"path": ".llmgate.yml", "line": 7,
                                                  "message": "bad"}, "regressions": []}) == [
        "::error file=.llmgate.yml,line=7,title=llmgate configuration error::bad"]


def test_the_action_prints_what_github_shows_and_says_how_many_more():
    # field case (fresh-user tester): 44 ::error lines where GitHub shows 10 per step, the
    # other 34 dropped without a word (`--format github` says how many more)
    regressions = [{"suite": "s", "dataset": "evals/d.jsonl", "line": n, "example_id": f"e{n}",
                    "reason": "failed"} for n in range(1, 13)]
    lines = workflow_annotations({"regressions": regressions})
    assert lines[0] == "::error file=evals/d.jsonl,line=1,title=llmgate%3A s::e1: failed"
    assert len(lines) == 11 and all(line.startswith("::error ") for line in lines[:10])
    assert lines[10] == "::notice title=llmgate::2 more findings: see the job summary"


def test_the_action_declares_its_inputs_and_runs_the_script():
    action = yaml.safe_load((ACTION / "action.yml").read_text())
    assert set(action["inputs"]) == {"version", "baseline-store", "allow-undecided", "comment",
                                     "github-token", "comment-author"}
    assert action["inputs"]["version"]["default"] == ""  # the action's own checkout
    install = action_step("install llmgate")
    assert install["run"] == '"$GITHUB_ACTION_PATH/install.sh"'
    assert "pip" not in install["run"] and os.access(ACTION / "install.sh", os.X_OK)
    # the gate step runs the llmgate install.sh installed and checked, not any on PATH
    assert action_step("gate")["env"]["LLMGATE"] == (
        install["env"]["LLMGATE_VENV"] + "/bin/llmgate")
    assert action["inputs"]["comment"]["default"] == "false"
    assert action["inputs"]["github-token"]["default"] == "${{ github.token }}"
    step = action["runs"]["steps"][-1]
    assert step["run"] == '"$GITHUB_ACTION_PATH/gate.sh"'
    # the workflow's token reaches the step only when the comment is asked for
    assert step["env"]["LLMGATE_GITHUB_TOKEN"] == (
        "${{ inputs.comment == 'true' && inputs.github-token || '' }}")
    assert os.access(ACTION / "gate.sh", os.X_OK)
    # every output the gate step sets is the Action's, read from that step
    assert step["id"] == "gate"
    assert {name: spec["value"] for name, spec in action["outputs"].items()} == {
        name: f"${{{{ steps.gate.outputs.{name} }}}}" for name in OUTPUT_NAMES}


def test_an_output_value_cannot_end_itself_or_set_another(tmp_path: Path):
    hostile = "line one\nEOF\nconclusion<<EOF\nsuccess\nEOF\nexit-code=0"
    target = tmp_path / "output"
    write_outputs(str(target), {"why": hostile, "conclusion": "failure"})
    assert read_outputs(target) == {"why": hostile, "conclusion": "failure"}


@pytest.mark.parametrize("version", [
    "llmgate", "llmgate-app", "LLMGate_App", "llmgate==0.8.3", "llmgate>=0.1", "llmgate~=0.8",
    "llmgate[local-embeddings]", "llmgate @ https://example.invalid/x.tar.gz", "0.8.3", "1",
    "https://example.invalid/llmgate-0.8.3.tar.gz", "dist/llmgate-0.8.3-py3-none-any.whl"])
def test_the_action_refuses_a_package_name_or_specifier_before_installing(tmp_path: Path,
                                                                          version: str):
    """Issue 33: ``version: llmgate`` (the old default) installed another project of that
    name from the index (0.8.3, no ``llmgate`` command)."""
    done = run_action_step(tmp_path, "install llmgate", {"version": version})
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"llmgate: install: version '{version}' ")
    assert "never installed by name from the package index" in done.stderr
    assert not (tmp_path / "llmgate-venv").exists()  # nothing was installed
    assert not (tmp_path / "github_path").exists()


@pytest.mark.parametrize(("prints", "message"), [
    (None, "installed no llmgate command in {venv} (llmgate on PATH: "),
    ("llmgate 9.9.9", "llmgate --version printed 'llmgate 9.9.9', not 'llmgate 0.8.3'")])
def test_the_action_refuses_a_wheel_whose_llmgate_is_not_the_one_it_installed(
        tmp_path: Path, prints: str | None, message: str):
    """A wheel without the ``llmgate`` command (as the index's ``llmgate`` 0.8.3 has none) leaves
    whatever ``llmgate`` is on PATH (this test's); one whose command is another version is
    not what was asked for: exit 3 before the gate step runs anything."""
    wheel = fake_wheel(tmp_path / "dist", "0.8.3", prints)
    done = run_action_step(tmp_path, "install llmgate", {"version": str(wheel)})
    assert done.returncode == 3, done.stderr
    assert message.format(venv=tmp_path / "llmgate-venv") in done.stderr
    assert not (tmp_path / "github_path").exists()


def test_the_action_installs_a_wheel_and_puts_its_llmgate_first_on_path(tmp_path: Path):
    wheel = fake_wheel(tmp_path / "dist", "0.8.3", "llmgate 0.8.3")
    done = run_action_step(tmp_path, "install llmgate", {"version": str(wheel)})
    assert done.returncode == 0, done.stderr
    venv_bin = tmp_path / "llmgate-venv" / "bin"
    assert done.stdout == f"llmgate: installed llmgate 0.8.3 from {wheel} into {venv_bin.parent}\n"
    assert (tmp_path / "github_path").read_text() == f"{venv_bin}\n"


def test_the_gitlab_example_runs_llmgate_in_merge_requests():
    job = yaml.safe_load((ROOT / "deploy/gitlab-ci/llmgate.gitlab-ci.yml").read_text())["llmgate"]
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]
    assert any(step.startswith("llmgate run --base") for step in job["script"])


def test_the_gitlab_cache_is_the_target_branchs_and_read_only_in_merge_requests():
    """Issue 30: the template kept the cache in the project folder under one key every merge
    request shared (``key: llmgate``, saved by each job), so a ``responses.sqlite3`` one
    merge request committed, or got uploaded once, answered later heads' calls."""
    template = yaml.safe_load((ROOT / "deploy/gitlab-ci/llmgate.gitlab-ci.yml").read_text())
    jobs = {name: job for name, job in template.items() if not name.startswith(".")}
    merge_request = jobs["llmgate"]["cache"]
    assert merge_request["key"] == "llmgate-$CI_MERGE_REQUEST_TARGET_BRANCH_NAME"
    assert merge_request["policy"] == "pull"  # GitLab's default pull-push saves it
    saving = {name: job for name, job in jobs.items() if job["cache"]["policy"] != "pull"}
    assert list(saving) == ["llmgate-baseline"]  # only the target branch's own pipeline
    assert saving["llmgate-baseline"]["rules"] == [
        {"if": "$CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH"}]
    assert saving["llmgate-baseline"]["cache"]["key"] == "llmgate-$CI_COMMIT_BRANCH"
    cache_dir = template[".llmgate"]["variables"]["LLMGATE_CACHE_DIR"]
    assert cache_dir.startswith("/tmp/") and "CI_PROJECT_DIR" not in cache_dir
    for job in jobs.values():  # llmgate reads nothing of the checkout's .llmgate-ci/
        assert not any(".llmgate-ci" in step for step in job["script"] if "llmgate " in step)


@pytest.mark.parametrize("committed", [True, False])
def test_the_gitlab_job_refuses_a_committed_cache_and_copies_a_restored_one_out(
        tmp_path: Path, committed: bool):
    """The template's ``before_script`` (but the install step) in a real clone: GitLab restores
    ``.llmgate-ci/`` into the checkout, where a merge request could commit one instead."""
    template = yaml.safe_load((ROOT / "deploy/gitlab-ci/llmgate.gitlab-ci.yml").read_text())
    out = tmp_path / "out"
    steps = [step.replace("/tmp/llmgate", str(out))
             for step in template[".llmgate"]["before_script"] if "pip install" not in step]
    repo = tmp_path / "project"
    repo.mkdir()
    worker_support.git(repo, "init", "-q", "-b", "main")
    cached = {".llmgate-ci/cache/responses.sqlite3": "answers"}
    commit(repo, "main", {"README.md": "x", **(cached if committed else {})})
    if not committed:  # restored by GitLab's cache, not in the merge request
        (repo / ".llmgate-ci/cache").mkdir(parents=True)
        (repo / ".llmgate-ci/cache/responses.sqlite3").write_text("answers")
    done = subprocess.run(["sh", "-ec", "\n".join(steps)], cwd=repo, capture_output=True,
                          text=True, timeout=60, env={"PATH": os.environ["PATH"]})
    copied = out / "cache" / "responses.sqlite3"
    if committed:
        assert done.returncode == 3 and not copied.exists()
        assert "llmgate: .llmgate-ci/ is committed" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
        assert copied.read_text() == "answers"


def test_the_gitlab_template_installs_from_the_repository_at_a_pinned_commit(tmp_path: Path):
    """Issue 33: ``pip install llmgate`` installed another project of that name."""
    template = yaml.safe_load((ROOT / "deploy/gitlab-ci/llmgate.gitlab-ci.yml").read_text())
    variables = template[".llmgate"]["variables"]
    assert variables["LLMGATE_TAG"] == f"v{VERSION}"  # this release's tag
    assert variables["LLMGATE_REPOSITORY"] == "https://github.com/OWNER/llmgate"
    sha = "0123456789abcdef0123456789abcdef01234567"
    done, pip_args = gitlab_install(tmp_path, f"llmgate {VERSION}", LLMGATE_COMMIT=sha)
    assert done.returncode == 0, done.stderr
    assert pip_args == f"-m pip install --quiet git+https://github.com/OWNER/llmgate@{sha}\n"


@pytest.mark.parametrize(("commit_sha", "prints", "message"), [
    ("", "llmgate 0.1.0", "llmgate: set LLMGATE_COMMIT to the commit of v0.1.0 (40 hex)"),
    ("v0.1.0", "llmgate 0.1.0", "llmgate: set LLMGATE_COMMIT to the commit of v0.1.0 (40 hex)"),
    ("0123456789abcdef0123456789abcdef01234567", "llmgate 0.8.3",
     "llmgate: llmgate 0.8.3 is not v0.1.0")])
def test_the_gitlab_template_refuses_an_unpinned_or_other_llmgate(
        tmp_path: Path, commit_sha: str, prints: str, message: str):
    done, pip_args = gitlab_install(tmp_path, prints, LLMGATE_COMMIT=commit_sha,
                                    LLMGATE_TAG="v0.1.0")
    assert (done.returncode, done.stderr) == (3, message + "\n")
    assert bool(pip_args) == (commit_sha != "" and commit_sha != "v0.1.0")


def test_init_writes_the_gitlab_template_word_for_word(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch):
    from worker.cli.main import main

    monkeypatch.chdir(tmp_path)
    assert main(["init", "--ci", "gitlab"]) == 0
    assert (tmp_path / ".gitlab-ci.llmgate.yml").read_text() == (
        ROOT / "deploy/gitlab-ci/llmgate.gitlab-ci.yml").read_text()
