"""No shipped file installs llmgate by name from the package index (issue 33).

The name ``llmgate`` on the package index is another project's (0.8.3, no ``llmgate``
command): ``pip install llmgate``, which the Action, the workflow ``llmgate init`` wrote and
the GitLab template ran, installed that. Every file of the repository but its tests (the
Action, the templates, the docs, README.md, the Dockerfile, deploy/) and every file
``llmgate init`` writes is scanned for an install command naming ``llmgate``, with or without
extras, a version or quotes; pyproject.toml's requirements must not name it either.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest

from worker.cli.init import files_for
from worker.version import DISTRIBUTION

ROOT = Path(__file__).resolve().parents[3]
#: An install command of pip, pipx, uv or poetry; what follows it on the line is its arguments.
INSTALL = re.compile(r"\b(?:pip3?|pipx|uv\s+pip|uv\s+tool)\s+install\b|\b(?:uv|poetry)\s+add\b")
#: A requirement of the bare name: ``llmgate``, ``llmgate[extras]``, ``llmgate==0.8.3`` ...
BARE = re.compile(r"llmgate\s*(\[[^\]]*\])?\s*([<>=!~@;].*)?", re.IGNORECASE)


def bare_name_installs(text: str) -> list[str]:
    """The lines of ``text`` (``N: line``) with an install command one of whose arguments is a
    requirement of the bare name ``llmgate``."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in INSTALL.finditer(line):
            arguments = re.split(r"&&|\|\||;|\||`|\)\s*$", line[match.end():])[0]
            try:
                tokens = shlex.split(arguments)
            except ValueError:  # an unclosed quote: the words as they stand
                tokens = arguments.split()
            if any(BARE.fullmatch(token.strip("'\",")) for token in tokens):
                found.append(f"{number}: {line.strip()}")
    return found


def shipped_files() -> list[Path]:
    """The repository's files, tracked or new (not ignored), but its tests."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")
    return [ROOT / name for name in sorted(set(listed)) if name and not name.startswith("tests/")
            and (ROOT / name).is_file()]


@pytest.mark.parametrize("line", [
    "pip install llmgate", "- run: pip install llmgate", "    - pip install llmgate",
    'python3 -m pip install --quiet "llmgate[local-embeddings]"',
    "Needs `pip install 'llmgate[local-embeddings]'` (install the CPU torch first)",
    "pip install -U llmgate==0.8.3 && llmgate run", "pipx install LLMGate", "uv add llmgate",
    "pip install 'llmgate[a, b]>=0.1'", "pip install llmgate @ git+https://x/y"])
def test_the_scan_finds_an_install_by_the_bare_name(line: str):
    assert bare_name_installs(f"text\n{line}\n") == [f"2: {line.strip()}"]


@pytest.mark.parametrize("line", [
    "pip install -e '.[test]' && llmgate demo", "pip install .",
    'pip install "git+https://github.com/OWNER/llmgate@v0.1.0"',
    "pip install dist/llmgate_app-0.1.0-py3-none-any.whl", "pip install llmgate-app",
    "pip install torch --index-url https://download.pytorch.org/whl/cpu",
    "llmgate is installed with pip", "pip install -e '.[local-embeddings]' llmgate-model"])
def test_the_scan_passes_installs_from_a_source_or_another_name(line: str):
    assert bare_name_installs(line) == []


def test_no_shipped_file_installs_llmgate_by_name():
    files = shipped_files()
    assert ROOT / "deploy/github-action/action.yml" in files and ROOT / "README.md" in files
    found = {}
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # not text
            continue
        if lines := bare_name_installs(text):
            found[str(path.relative_to(ROOT))] = lines
    assert found == {}


@pytest.mark.parametrize("ci", ["github", "gitlab"])
@pytest.mark.parametrize("target", ["command", "model"])
def test_no_file_init_writes_installs_llmgate_by_name(ci: str, target: str):
    args = argparse.Namespace(target=target, ci=ci, model="openai/gpt-4o-mini",
                              api_key_env="OPENAI_API_KEY")
    files = files_for(args)
    assert any(path.startswith((".github/", ".gitlab-ci")) for path in files)
    assert {path: bare_name_installs(text) for path, text in files.items()} == {
        path: [] for path in files}


def test_the_distribution_is_not_named_llmgate_nor_requires_it():
    """pyproject.toml's name is `DISTRIBUTION`, not the index's ``llmgate``, and no requirement
    (its own extras included) names ``llmgate``: pip would fetch that one from the index."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION != "llmgate"
    requirements = project["dependencies"] + [
        req for reqs in project["optional-dependencies"].values() for req in reqs]
    names = {re.split(r"[\s\[<>=!~;@]", req, maxsplit=1)[0].lower() for req in requirements}
    assert "llmgate" not in names
    assert project["scripts"]["llmgate"] == "worker.cli.entry:console"  # the command stays


def test_the_docs_say_how_to_install_from_a_tag_a_wheel_or_the_image():
    install = (ROOT / "docs/install.md").read_text()
    section = install.split("## Install the llmgate command\n", 1)[1].split("\n## ", 1)[0]
    assert 'pip install "git+https://github.com/OWNER/llmgate@v' in section  # a tag
    assert "python3 -m build" in section and f"pip install dist/{DISTRIBUTION.replace('-', '_')}-"\
        in section  # a wheel
    assert "docker build -t llmgate:" in section  # the image (Dockerfile)
    assert f"is `{DISTRIBUTION}`" in section  # the name to publish under
    assert "(docs/install.md#install-the-llmgate-command)" in (ROOT / "README.md").read_text()
