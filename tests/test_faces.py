"""Issue 36: every stage package names its face, and other packages import through it.

A package's face is its ``__init__.py``'s ``__all__``: the names other packages may import.
The rules, over every module of worker/, app/ and llmgate/ (imports inside functions and under
``TYPE_CHECKING`` included):

- every package of worker/ and app/ has a face, but the three namespaces (``worker``,
  ``worker.evals``, ``app``), whose own modules are the shared vocabulary every stage imports by
  path (``llmgate``, the Python API, has the ``__all__`` of its users, and imports faces);
- a module of another package imports a package's names from its face, never from one of its
  modules (``from worker.github import GitHubClient``, not ``from worker.github.client import``);
  a face may name a module of its package (``from worker.runtime import locks``) where callers
  use it as a namespace;
- a face names only what other packages import, and each name it lists resolves to the object
  its module defines; a lazy face (``lazy_loader.attach``) names for type checkers, under
  ``TYPE_CHECKING``, exactly what it loads.

worker/pipeline/ taking the engine through the stage faces only, never a module of theirs, is
also an import-linter contract (pyproject.toml, ``pipeline-evals``; tests/test_lint.py).
"""

from __future__ import annotations

import ast
import importlib
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from bench.layout_figures import Module, face_map, find_modules

ROOT = Path(__file__).resolve().parent.parent
#: Packages whose own modules are vocabulary imported by path (and the Python API): no face.
NAMESPACES = {"worker", "worker.evals", "app", "llmgate"}


def modules_of(root: Path) -> dict[str, Module]:
    """Every module of ``root``'s worker/, app/ and llmgate/, by dotted name."""
    return {**find_modules(root, "worker"), **find_modules(root, "app"),
            **find_modules(root, "llmgate")}


MODULES = modules_of(ROOT)
FACES = sorted(name for name, module in MODULES.items()
               if module.is_package and name not in NAMESPACES)


def package_of(name: str, modules: Mapping[str, Module]) -> str:
    """The package a module belongs to (a package's ``__init__.py`` belongs to itself)."""
    return name if modules[name].is_package else name.rsplit(".", 1)[0]


def imported(module: Module) -> Iterator[tuple[int, str, list[str]]]:
    """Yield ``(line, module imported from, names)`` of every absolute import in ``module``."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []


def crossings(root: Path) -> list[str]:
    """``path:line: module`` of every import of another package's inner module under ``root``."""
    modules = modules_of(root)
    found = []
    for name, module in modules.items():
        for line, target, _ in imported(module):
            if target in modules and not modules[target].is_package:
                owner = package_of(target, modules)
                if owner not in NAMESPACES and package_of(name, modules) != owner:
                    found.append(f"{module.path.relative_to(root)}:{line}: {target}")
    return sorted(found)


def face_names(package: str) -> list[str]:
    """The package's ``__all__`` as Python sees it."""
    names: list[str] = importlib.import_module(package).__all__
    return names


def typing_names(package: str) -> set[str]:
    """Names the ``__init__.py`` imports under ``if TYPE_CHECKING:``."""
    found = set()
    for node in MODULES[package].tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for child in node.body:
                if isinstance(child, ast.ImportFrom):
                    found |= {alias.asname or alias.name for alias in child.names}
    return found


def test_every_stage_package_names_its_face() -> None:
    missing = [name for name in FACES if not hasattr(importlib.import_module(name), "__all__")]
    assert missing == []
    assert len(FACES) == 17  # 15 of worker/, 2 of app/


def test_no_module_imports_another_packages_inner_module() -> None:
    assert crossings(ROOT) == [], "import these names from the package's face instead"


def test_the_check_finds_an_import_past_a_face(tmp_path: Path) -> None:
    for top in ("worker", "app", "llmgate"):
        shutil.copytree(ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "worker/gate/throwaway.py").write_text(
        "from worker.github import GitHubClient\n"  # through the face: fine
        "def late() -> None:\n    from worker.github.client import GitHubClient\n")
    (tmp_path / "app/routes/throwaway.py").write_text("from app.dashboard.charts import x\n")
    (tmp_path / "llmgate/throwaway.py").write_text("from worker.cli.main import repo_root\n")
    assert crossings(tmp_path) == ["app/routes/throwaway.py:1: app.dashboard.charts",
                                   "llmgate/throwaway.py:1: worker.cli.main",
                                   "worker/gate/throwaway.py:3: worker.github.client"]


def test_a_face_names_only_what_other_packages_import() -> None:
    used: dict[str, set[str]] = {name: set() for name in FACES}
    for name, module in MODULES.items():
        for _, target, names in imported(module):
            if target in used and package_of(name, MODULES) != target:
                used[target] |= set(names)
    unused = {name: sorted(set(face_names(name)) - used[name]) for name in FACES}
    assert {name: extra for name, extra in unused.items() if extra} == {}


@pytest.mark.parametrize("package", FACES)
def test_each_name_of_a_face_is_its_modules_object(package: str) -> None:
    face = importlib.import_module(package)
    lazy = face_map(MODULES[package])
    for name in face_names(package):
        submodule = f"{package}.{name}"
        if name in lazy:
            origin = importlib.import_module(f"{package}.{lazy[name]}")
            assert getattr(face, name) is getattr(origin, name), name
        elif submodule in MODULES:
            assert getattr(face, name) is importlib.import_module(submodule)
        else:
            assert getattr(face, name) is not None, name
    if lazy or typing_names(package):
        assert typing_names(package) == set(face_names(package))
