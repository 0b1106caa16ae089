"""What the GitHub Action tests share (tests/unit/cli/test_github_action*.py): the Action's
steps run as a runner runs them, the gate step under a simulated Actions environment (a real
``pull_request`` payload from tests/fixtures/github/webhooks, its SHAs pointed at the tiny
repository), and readers of what the fake GitHub holds."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit.worker_support import (
    APP_ID,
    ECHO,
    INSTALLATION_ID,
    OWNER,
    REPO,
)
from worker.github.auth import AppCredentials, InstallationTokenCache
from worker.github.client import GitHubClient

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
