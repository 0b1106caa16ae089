"""The GitHub Action's gate step (deploy/github-action/gate.sh) under a simulated Actions
environment: a real ``pull_request`` payload (tests/fixtures/github/webhooks, its SHAs
pointed at the tiny repository), ``GITHUB_STEP_SUMMARY`` and the workflow commands.

With ``comment: true`` the step posts the sticky comment to the schema-checking fake GitHub
on loopback (``GITHUB_API_URL``) with a token the fake minted, as GitHub mints a workflow's
``GITHUB_TOKEN``; the App's own gate job, on the same fake, posts the comment it is compared
with.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.fakes.fake_github import FakeGitHubServer, generate_app_keypair
from tests.fakes.fake_llm import running_fake_llm
from tests.unit import worker_support
from tests.unit.llm_support import KEY_ENV
from tests.unit.worker_support import (
    APP_ID,
    CONFIG,
    ECHO,
    INSTALLATION_ID,
    OWNER,
    REPO,
    build_tiny_repo,
    commit,
    fake_github_env,
    gate_payload,
)
from worker.cli.action import escape, workflow_annotations
from worker.cli.action_outputs import OUTPUT_NAMES, write_outputs
from worker.github.auth import AppCredentials, InstallationTokenCache
from worker.github.client import GitHubClient
from worker.version import VERSION

ROOT = Path(__file__).resolve().parents[3]
ACTION = ROOT / "deploy" / "github-action"
PAYLOAD = ROOT / "tests/fixtures/github/webhooks/pull_request.opened.json"
#: The pull request number of `PAYLOAD`.
PR_NUMBER = 2
#: Who a workflow's GITHUB_TOKEN comments as.
ACTIONS_BOT = "github-actions[bot]"
#: Seconds one gate.sh step may take before the test calls it hung (see `run_gate_step`).
STEP_TIMEOUT_S = 300


def dumping_target(dump: Path) -> str:
    """A head target that breaks ``bravo`` and appends its whole environment, as a JSON
    line, to ``dump``."""
    return ECHO.replace('BROKEN = ""', 'BROKEN = "bravo"') + (
        f"import os\nwith open({str(dump)!r}, 'a') as out:\n"
        "    out.write(json.dumps(dict(os.environ)) + '\\n')\n")


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


def read_outputs(path: Path) -> dict[str, str]:
    """Parse a ``GITHUB_OUTPUT`` file as the Actions runner does: ``NAME=VALUE`` lines and
    ``NAME<<DELIMITER`` blocks ending at a line that is the delimiter."""
    found: dict[str, str] = {}
    lines = iter(path.read_text(encoding="utf-8").split("\n"))
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            value = []
            for body in lines:
                if body == delimiter:
                    break
                value.append(body)
            else:
                raise AssertionError(f"output {name} has no closing delimiter")
            found[name] = "\n".join(value)
        elif line:
            name, value_text = line.split("=", 1)
            found[name] = value_text
    return found


def test_an_output_value_cannot_end_itself_or_set_another(tmp_path: Path):
    hostile = "line one\nEOF\nconclusion<<EOF\nsuccess\nEOF\nexit-code=0"
    target = tmp_path / "output"
    write_outputs(str(target), {"why": hostile, "conclusion": "failure"})
    assert read_outputs(target) == {"why": hostile, "conclusion": "failure"}


def action_step(name: str) -> dict[str, Any]:
    """The step of action.yml called ``name``."""
    action = yaml.safe_load((ACTION / "action.yml").read_text())
    [step] = [step for step in action["runs"]["steps"] if step["name"] == name]
    return step


def run_action_step(tmp_path: Path, name: str, inputs: dict[str, str], action_path: Path = ACTION,
                    **env: str) -> subprocess.CompletedProcess[str]:
    """Run action.yml's step ``name`` as the runner runs a composite step: its ``${{ }}``
    expressions filled from ``inputs`` (over the inputs' defaults), ``runner.temp`` =
    ``tmp_path`` and ``github.action_repository`` = ``OWNER/llmgate``; in bash, with
    ``GITHUB_ACTION_PATH`` = ``action_path`` and ``GITHUB_PATH`` = ``tmp_path / "github_path"``.
    ``env``: any other variables (the ``PIP_*`` of this machine are passed on)."""
    action = yaml.safe_load((ACTION / "action.yml").read_text())
    values = {f"inputs.{key}": str(spec.get("default", "")) for key, spec in
              action["inputs"].items()} | {f"inputs.{key}": value for key, value in inputs.items()}
    values |= {"runner.temp": str(tmp_path), "github.action_repository": "OWNER/llmgate"}

    def expand(text: str) -> str:
        return re.sub(r"\$\{\{\s*([\w.-]+)\s*\}\}", lambda m: values[m.group(1)], text)

    step = action_step(name)
    step_env = {key: value for key, value in os.environ.items() if key.startswith("PIP_")}
    step_env |= {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GITHUB_ACTIONS": "true",
                 "RUNNER_TEMP": str(tmp_path), "GITHUB_ACTION_PATH": str(action_path),
                 "GITHUB_PATH": str(tmp_path / "github_path")}
    step_env |= {key: expand(str(value)) for key, value in step.get("env", {}).items()} | env
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                           expand(step["run"])], cwd=tmp_path, env=step_env,
                          capture_output=True, text=True, timeout=STEP_TIMEOUT_S)


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


def fake_wheel(folder: Path, version: str, prints: str | None) -> Path:
    """A wheel of a distribution named as llmgate's (pyproject.toml) at ``version``: with a
    ``llmgate`` command that prints ``prints``, or with no command (``prints`` None)."""
    folder.mkdir(exist_ok=True)
    wheel = folder / f"llmgate_app-{version}-py3-none-any.whl"
    info = f"llmgate_app-{version}.dist-info"
    files = {"fake_llmgate.py": f"def main():\n    print({prints!r})\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: llmgate-app\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    if prints is not None:
        files[f"{info}/entry_points.txt"] = "[console_scripts]\nllmgate = fake_llmgate:main\n"
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


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


def source_checkout(dest: Path) -> Path:
    """What a workflow's ``uses: OWNER/llmgate/deploy/github-action@TAG`` downloads: this
    repository's files (those a build reads, and the action); returns the action's folder."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    for name in ("app", "worker", "llmgate", "deploy/github-action"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, dest / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest / "deploy" / "github-action"


@pytest.mark.slow
def test_the_action_installs_llmgate_from_its_own_checkout(tmp_path: Path):
    """The default (no ``version``): pip builds the action's own repository, two levels above
    ``GITHUB_ACTION_PATH``, into a venv of its own; ``llmgate --version`` there is the
    checkout's worker/version.py, and the gate step's ``LLMGATE`` is that command. Its
    dependencies are left out here (``PIP_NO_DEPS``): ``--version`` needs none."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    action_path = source_checkout(checkout)
    version = checkout / "worker" / "version.py"
    version.write_text(version.read_text().replace(f'VERSION = "{VERSION}"',
                                                   'VERSION = "7.7.7"'))  # the pinned release's
    done = run_action_step(tmp_path, "install llmgate", {}, action_path=action_path,
                           PIP_NO_DEPS="1")
    assert done.returncode == 0, done.stderr
    venv = tmp_path / "llmgate-venv"
    assert done.stdout == f"llmgate: installed llmgate 7.7.7 from {checkout} into {venv}\n"
    llmgate = action_step("gate")["env"]["LLMGATE"].replace("${{ runner.temp }}", str(tmp_path))
    assert llmgate == str(venv / "bin" / "llmgate")
    assert subprocess.run([llmgate, "--version"], capture_output=True, text=True,
                          check=True).stdout == "llmgate 7.7.7\n"


@pytest.mark.slow
def test_the_action_installs_a_git_ref_of_its_own_repository(tmp_path: Path):
    """``version: v7.7.7``: pip installs the action's repository (``github.action_repository``
    on ``GITHUB_SERVER_URL``, here a folder) at that tag; the version the installed
    distribution declares is what ``llmgate --version`` must print."""
    server = tmp_path / "server"
    repo = server / "OWNER" / "llmgate"
    repo.mkdir(parents=True)
    source_checkout(repo)
    version = repo / "worker" / "version.py"
    version.write_text(version.read_text().replace(f'VERSION = "{VERSION}"', 'VERSION = "7.7.7"'))
    worker_support.git(repo, "init", "-q", "-b", "main")
    commit(repo, "main", {"NOTES": "v7.7.7"})
    worker_support.git(repo, "tag", "v7.7.7")
    runner = tmp_path / "runner"
    runner.mkdir()
    done = run_action_step(runner, "install llmgate", {"version": "v7.7.7"},
                           GITHUB_SERVER_URL=server.as_uri(), PIP_NO_DEPS="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"llmgate: installed llmgate 7.7.7 from git+{server.as_uri()}/OWNER/"
                           f"llmgate@v7.7.7 into {runner / 'llmgate-venv'}\n")


def run_gate_step(tmp_path: Path, repo: Path, base_sha: str, head_sha: str,
                  **env: str) -> subprocess.CompletedProcess[str]:
    """Run gate.sh in ``repo`` as GitHub Actions runs it for the pull_request event `PAYLOAD`
    (its SHAs replaced); ``env``: the step's inputs and any other variables. The job summary
    is ``tmp_path / "summary.md"``, which starts with ``earlier step``; the step's outputs
    file (``GITHUB_OUTPUT``) ``tmp_path / "output.txt"``."""
    event = json.loads(PAYLOAD.read_text())
    event["pull_request"]["base"]["sha"] = base_sha
    event["pull_request"]["head"]["sha"] = head_sha
    (tmp_path / "event.json").write_text(json.dumps(event))
    summary = tmp_path / "summary.md"
    if not summary.exists():
        summary.write_text("earlier step\n")
    llmgate = shutil.which("llmgate", path=str(Path(sys.executable).parent))
    step_env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GITHUB_ACTIONS": "true",
                "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
                "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
                "GITHUB_STEP_SUMMARY": str(summary), "RUNNER_TEMP": str(tmp_path),
                "LLMGATE": str(llmgate), "LLMGATE_CACHE_DIR": str(tmp_path / "cache"), **env}
    # One step is a few seconds alone; a 2-core CI machine running the suite's other worker
    # has taken over 120 s (TimeoutExpired), so the limit only catches a hang.
    return subprocess.run([str(ACTION / "gate.sh")], cwd=repo, env=step_env,
                          capture_output=True, text=True, timeout=STEP_TIMEOUT_S)


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


def gitlab_install(tmp_path: Path, llmgate_prints: str,
                   **variables: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """The template's install step with its variables (over ``variables``), ``pip`` and
    ``llmgate`` stand-ins first on PATH; returns the run and the arguments pip got."""
    template = yaml.safe_load((ROOT / "deploy/gitlab-ci/llmgate.gitlab-ci.yml").read_text())
    [step] = [step for step in template[".llmgate"]["before_script"] if "pip install" in step]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/pip-args\n')
    (bin_dir / "llmgate").write_text(f"#!/bin/sh\necho '{llmgate_prints}'\n")
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}",
           **template[".llmgate"]["variables"], **variables}
    done = subprocess.run(["sh", "-ec", step], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env=env)
    args = tmp_path / "pip-args"
    return done, args.read_text() if args.exists() else ""


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


async def workflow_token(github: FakeGitHubServer, private_pem: str) -> str:
    """A token of installation `INSTALLATION_ID` minted by the fake, as GitHub mints a
    workflow's ``GITHUB_TOKEN`` (an installation token of the GitHub Actions app)."""
    creds = AppCredentials(APP_ID, private_pem)
    async with httpx.AsyncClient(timeout=10) as session:
        return await GitHubClient(session, github.url, creds, InstallationTokenCache(creds),
                                  INSTALLATION_ID).installation_token()


def comments_on(state: dict[str, Any], number: int) -> list[dict[str, Any]]:
    """The fake's comments on pull request ``number`` of the tiny repository, oldest first."""
    return [c for c in state["comments"] if (c["owner"], c["repo"], c["issue_number"]) == (
        OWNER, REPO, number)]


def baseline_line(body: str) -> str:
    """The comment's one ``**Baseline:**`` line."""
    [line] = [line for line in body.splitlines() if line.startswith("**Baseline:**")]
    return line


def without_baseline(body: str) -> str:
    """The comment without its ``**Baseline:**`` line."""
    return body.replace(baseline_line(body) + "\n", "")


@pytest.fixture()
def dump(tmp_path: Path) -> Path:
    """The file a `dumping_target` appends its environment to (writable by targets)."""
    path = tmp_path / "target-env.jsonl"
    path.write_text("")
    return path


@pytest.fixture()
def actions_github(monkeypatch: pytest.MonkeyPatch, redis_url: str, tmp_path: Path,
                   dump: Path) -> Iterator[tuple[FakeGitHubServer, str]]:
    """A fresh fake GitHub the App's worker (environment, Redis) points at; (it, App key)."""
    keys = generate_app_keypair()
    with fake_github_env(monkeypatch, redis_url, tmp_path / "work", keys=keys,
                         LLMGATE_SANDBOX_WRITE_PATHS=str(dump)) as server:
        yield server, keys[0]


@pytest.mark.slow
async def test_comment_is_posted_once_then_edited_and_is_the_apps_comment(
        actions_github, tmp_path: Path, dump: Path):
    github, private_pem = actions_github
    repo = tmp_path / "repo"
    shas = build_tiny_repo(repo)
    shas["pr/env"] = commit(repo, "pr/env", {"echo.py": dumping_target(dump)})
    # the App's own gate job comments on pull request 5 of the same repository and heads
    await worker_support.run_jobs([gate_payload(str(repo), shas["pr/env"], shas["main"],
                                                number=5)])
    [app_comment] = comments_on(github.state(), 5)
    dump.write_text("")  # what the App's run of the head wrote
    github.setup({"bot_login": ACTIONS_BOT})  # from here on, comments are the workflow's
    token = await workflow_token(github, private_pem)
    step = {"LLMGATE_COMMENT": "true", "LLMGATE_GITHUB_TOKEN": token, "GITHUB_TOKEN": token,
            "GITHUB_API_URL": github.url, "GITHUB_REPOSITORY": f"{OWNER}/{REPO}",
            "LLMGATE_SANDBOX_WRITE_PATHS": str(dump),
            "LLMGATE_BASELINE_STORE": str(tmp_path / "baselines")}  # as the App keeps its bases

    first = run_gate_step(tmp_path, repo, shas["main"], shas["pr/env"], **step)
    assert first.returncode == 1, first.stderr
    assert "::warning" not in first.stdout
    [posted] = comments_on(github.state(), PR_NUMBER)
    assert posted["user"] == {"login": ACTIONS_BOT, "type": "Bot"}
    # the App's comment, byte for byte, but for the one sentence `llmgate run` words its own
    # way (worker/cli/baseline.py: the base it was given is "the base")
    base = shas["main"][:7]
    assert without_baseline(posted["body"]) == without_baseline(app_comment["body"])
    assert baseline_line(app_comment["body"]) == (
        f"**Baseline:** compared with {base} (base run now, stored for later pull requests)")
    assert baseline_line(posted["body"]) == (
        f"**Baseline:** compared with {base}, the base (base run now, stored for later pull "
        "requests)")
    assert "bravo" in posted["body"]

    second = run_gate_step(tmp_path, repo, shas["main"], shas["pr/docs"], **step)  # a new push
    assert second.returncode == 0, second.stderr
    [edited] = comments_on(github.state(), PR_NUMBER)  # still one comment: edited in place
    assert edited["id"] == posted["id"]
    assert edited["history"] == [posted["body"], edited["body"]]
    assert edited["body"] != posted["body"] and "bravo" not in edited["body"]
    assert github.state()["violations"] == []

    seen = [json.loads(line) for line in dump.read_text().splitlines()]
    assert len(seen) == 4  # the head's target ran once per example, and wrote its environment
    for env in seen:
        assert not {"LLMGATE_GITHUB_TOKEN", "GITHUB_TOKEN"} & set(env)
        assert token not in json.dumps(env)


@pytest.mark.slow
async def test_a_refused_comment_is_a_warning_and_leaves_the_exit_code(actions_github,
                                                                        tmp_path: Path):
    github, private_pem = actions_github
    repo = tmp_path / "repo"
    shas = build_tiny_repo(repo)
    forbidden = "Resource not accessible by integration"  # a fork's read-only GITHUB_TOKEN
    github.setup({"faults": [{"operation": "issues/create-comment", "status": 403,
                              "body": {"message": forbidden,
                                       "documentation_url": "https://docs.github.com/rest"}}]})
    token = await workflow_token(github, private_pem)
    done = run_gate_step(tmp_path, repo, shas["main"], shas["pr/drop"], LLMGATE_COMMENT="true",
                         LLMGATE_GITHUB_TOKEN=token, GITHUB_API_URL=github.url,
                         GITHUB_REPOSITORY=f"{OWNER}/{REPO}")
    assert done.returncode == 1, done.stderr  # the gate's failure, as without the comment
    [warning] = [line for line in done.stdout.splitlines() if line.startswith("::warning")]
    assert warning.startswith("::warning title=llmgate comment::the pull request comment was "
                              "not posted: POST /repos/{owner}/{repo}/issues/{number}/comments: "
                              f"GitHub answered 403: {forbidden}")
    assert "pull-requests: write" in warning and token not in done.stdout + done.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("earlier step\n### llmgate: failure")
    assert summary.rstrip().endswith(f"llmgate could not post its pull request comment: POST "
                                     f"/repos/{{owner}}/{{repo}}/issues/{{number}}/comments: "
                                     f"GitHub answered 403: {forbidden} (a pull request from a "
                                     f"fork gets a read-only token; otherwise give the job "
                                     f"\\`permissions: pull-requests: write\\`)")
    assert comments_on(github.state(), PR_NUMBER) == []
