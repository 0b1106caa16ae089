"""Style gates run with the tests: ruff over the tree, mypy --strict on app/ and worker/, and
the import rules of worker/README.md (import-linter's contracts in pyproject.toml, ruff's
banned-api for processes, and no private name across a module boundary)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.timing import scaled

ROOT = Path(__file__).resolve().parent.parent


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff not installed")
def test_ruff_is_clean() -> None:
    result = _run("ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(scaled(900))  # a cold cache on a loaded 2-core machine took over 300 s
def test_mypy_strict_is_clean() -> None:
    result = _run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr


# --- the import rules of worker/README.md ------------------------------------------------------

#: The packages whose modules the rules cover.
OURS = ("app", "worker")
#: The contracts of pyproject.toml's [tool.importlinter] (their ``name``s start so).
CONTRACTS = ("app/ imports worker/contract.py", "worker/: a package imports",
             "worker/evals/: verdict, run", "worker/jobs/: no job module",
             "litellm is imported", "gidgethub and httpx", "evals/verdict/, evals/score/",
             "worker/pipeline/ takes the engine")


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """Run import-linter on the tree at ``root`` (its pyproject.toml), without a cache."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)


def _is_module(root: Path, dotted: str) -> bool:
    path = root.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (head := _dotted(node.value)):
        return f"{head}.{node.attr}"
    return ""


def private_crossings(root: Path) -> list[str]:
    """Return each use of another llmgate module's leading-underscore name under ``root``.

    That is ``from worker.x import _y``, or ``m._y`` where ``m`` is bound to an imported
    llmgate module (``from worker import x as m``, ``import worker.x``); ``obj._y`` on other
    values is not a module boundary.
    """
    found = []
    for path in sorted(p for top in OURS for p in (root / top).rglob("*.py")):
        tree, rel = ast.parse(path.read_text(), str(path)), path.relative_to(root)
        bound: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level \
                    and (node.module or "").split(".")[0] in OURS:
                for alias in node.names:
                    if _private(alias.name):
                        found.append(f"{rel}:{node.lineno}: from {node.module} import {alias.name}")
                    elif _is_module(root, f"{node.module}.{alias.name}"):
                        bound.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                bound.update(a.asname or a.name.split(".")[0] for a in node.names
                             if a.name.split(".")[0] in OURS)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                base = _dotted(node.value)
                if base in bound or (base.split(".")[0] in bound and _is_module(root, base)):
                    found.append(f"{rel}:{node.lineno}: {base}.{node.attr}")
    return sorted(found, key=lambda f: (f.split(":")[0], int(f.split(":")[1])))


def test_the_import_contracts_hold() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert all(f"{name}" in result.stdout for name in CONTRACTS)


def test_no_private_name_crosses_a_module_boundary() -> None:
    assert private_crossings(ROOT) == []


@pytest.fixture(scope="module")
def broken_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of app/, worker/ and pyproject.toml with throwaway modules that break each rule."""
    root = tmp_path_factory.mktemp("broken")
    for top in OURS:
        shutil.copytree(ROOT / top, root / top, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    throwaway = {
        "app/throwaway.py": "from worker.gate import trust\n",  # app imports the worker
        "worker/evals/score/throwaway.py": "from worker.gate import trust\n"  # runs back up
                                           "from worker.evals.verdict import stats\n",
        "worker/jobs/throwaway.py": "from worker.jobs import push\n",  # a job imports a job
        "worker/pipeline/throwaway.py": "from worker.evals.run.runner import run_suites\n",
        "worker/report/throwaway.py": "import asyncio\nimport httpx\nimport litellm\n"
                                      "import redis\nimport subprocess\n"
                                      "asyncio.create_subprocess_exec('true')\n",  # off the edges
        "worker/gate/throwaway.py": "from worker.report.markdown import _INLINE\n"
                                    "from worker.security import process\n"
                                    "process._kill_group(1)\n",  # private names
    }
    for rel, text in throwaway.items():
        (root / rel).write_text(text)
    return root


def test_the_import_contracts_fail_on_a_module_that_breaks_them(broken_tree: Path) -> None:
    result = _lint_imports(broken_tree)
    assert result.returncode == 1, result.stdout + result.stderr
    broken = [line for line in result.stdout.splitlines() if "BROKEN" in line]
    assert len(broken) == len(CONTRACTS), result.stdout
    for text in ("worker.evals.score.throwaway -> worker.gate.trust",
                 "worker.evals.score.throwaway -> worker.evals.verdict.stats",
                 "app.throwaway -> worker.gate.trust", "worker.jobs.throwaway -> worker.jobs.push",
                 "worker.report.throwaway -> litellm", "worker.report.throwaway -> httpx",
                 "worker.report.throwaway -> redis",
                 "worker.pipeline.throwaway -> worker.evals.run.runner"):
        assert text in result.stdout, text


def test_private_names_found_on_a_module_that_crosses(broken_tree: Path) -> None:
    assert private_crossings(broken_tree) == [
        "worker/gate/throwaway.py:1: from worker.report.markdown import _INLINE",
        "worker/gate/throwaway.py:3: process._kill_group"]


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff not installed")
def test_ruff_bans_processes_off_the_edges(broken_tree: Path) -> None:
    result = subprocess.run(["ruff", "check", "--no-cache", "--select", "TID251",
                             "--output-format", "concise",
                             "worker/report/throwaway.py", "worker/security/process.py"],
                            cwd=broken_tree, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "worker/report/throwaway.py:5:8: TID251 `subprocess` is banned" in result.stdout
    assert "throwaway.py:6:1: TID251 `asyncio.create_subprocess_exec` is banned" in result.stdout
    assert "security/process.py" not in result.stdout  # an edge
