"""bench/layout_figures.py measures what it says: on small packages written here, whose figures
are known, and on worker/ itself against Python's own import of it (issue 36's figures)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.layout_figures import (
    FUNCTION,
    MODULE,
    TYPING,
    Figures,
    Import,
    Module,
    closure,
    faces,
    functions_run,
    graph,
    long_functions,
    measure,
    public_names,
    repeated_file_names,
)

ROOT = Path(__file__).resolve().parents[1]


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (path relative to ``root`` -> dedented text) under ``root``; return it."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture()
def toy(tmp_path: Path) -> Path:
    """pkg: a -> b -> c at module level, c -> a inside a function (a circle only then),
    d -> a under TYPE_CHECKING, sub/ with a face (``__all__`` and an import of sub.e)."""
    return write_tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "import os\nimport pkg.b\n\nPUBLIC = 1\n_private = 2\n",
        "pkg/b.py": "from . import c\n\n\ndef run():\n    return c\n",
        "pkg/c.py": "def later():\n    from pkg import a\n    return a\n\n\nclass Thing:\n"
                    "    pass\n",
        "pkg/d.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from pkg.a import"
                    " PUBLIC\n\nX, _Y = 1, 2\n",
        "pkg/sub/__init__.py": "from pkg.sub.e import E\n\n__all__ = ['E']\n",
        "pkg/sub/e.py": "E = 1\n",
        "pkg/sub/c.py": "from pkg.sub import e\n",
        "pkg/f.py": "from pkg.sub.c import e\n",
    })


def test_edges_are_sorted_by_where_the_import_stands(toy: Path) -> None:
    figures, modules, edges = measure(toy, "pkg")
    found = {(e.source, e.target, e.kind) for e in edges}
    assert found == {
        ("pkg.a", "pkg.b", MODULE), ("pkg.b", "pkg.c", MODULE), ("pkg.c", "pkg.a", FUNCTION),
        ("pkg.d", "pkg.a", TYPING), ("pkg.sub", "pkg.sub.e", MODULE),
        ("pkg.sub.c", "pkg.sub.e", MODULE),  # its own package's __init__ ran before it
        ("pkg.f", "pkg.sub.c", MODULE), ("pkg.f", "pkg.sub", MODULE),  # sub/__init__ runs
    }
    assert figures.modules == 9 and figures.packages == 2
    assert (figures.function_imports, figures.typing_imports) == (1, 1)


def test_chain_circles_and_closure_of_the_toy(toy: Path) -> None:
    figures, modules, edges = measure(toy, "pkg")
    assert figures.chain == ["pkg.a", "pkg.b", "pkg.c"]
    assert figures.module_circles == []
    assert figures.function_circles == [["pkg.a", "pkg.b", "pkg.c"]]
    at_import = graph(modules, edges, [MODULE])
    assert closure(at_import, "pkg.f") == {"pkg.sub", "pkg.sub.c", "pkg.sub.e"}


def test_names_files_functions_and_faces(toy: Path, tmp_path: Path) -> None:
    figures, modules, _ = measure(toy, "pkg")
    assert public_names(modules["pkg.a"]) == ["PUBLIC"]
    assert public_names(modules["pkg.d"]) == ["X"]
    assert public_names(modules["pkg.c"]) == ["Thing", "later"]
    assert repeated_file_names(modules, toy) == {"c.py": ["pkg", "pkg/sub"]}
    assert faces(modules) == ["pkg.sub"]
    body = "".join(f"x{i} = {i}\n" for i in range(58))
    sixty = "def sixty():\n" + textwrap.indent(body + "return 0\n", "    ")
    sixty_one = "class K:\n    def sixty_one(self):\n" + textwrap.indent(
        body + "pass\nreturn 0\n", "        ")
    write_tree(tmp_path / "long", {"pkg/__init__.py": "", "pkg/gate/__init__.py": "",
                               "pkg/gate/m.py": f"{sixty}\n\n{sixty_one}"})
    _, long_modules, _ = measure(tmp_path / "long", "pkg")
    assert long_functions(long_modules, ["pkg.gate"], 60) == [("pkg.gate.m:K.sixty_one", 61)]


def test_functions_run_counts_functions_not_module_bodies(tmp_path: Path) -> None:
    package = write_tree(tmp_path, {"pkg/m.py": "def f():\n    return 1\n", "pkg/n.py": "X = 1\n"})
    scope: dict[str, object] = {}
    m_code = compile((package / "pkg/m.py").read_text(), str(package / "pkg/m.py"), "exec")
    exec(m_code, scope)  # noqa: S102 (a file this test wrote)
    n_code = compile("X = 1\n", str(package / "pkg/n.py"), "exec")
    f = scope["f"]
    assert inspect.isfunction(f)
    assert functions_run([m_code, n_code, f.__code__, test_names_files_functions_and_faces
                          .__code__], package / "pkg") == ["m.py"]


@pytest.fixture(scope="module")
def worker_layout() -> tuple[Figures, dict[str, Module], list[Import]]:
    """The figures, modules and import edges of this repository's worker/."""
    return measure(ROOT, "worker")


def test_the_chain_found_in_worker_is_a_chain_of_real_imports(
        worker_layout: tuple[Figures, dict[str, Module], list[Import]]) -> None:
    figures, modules, edges = worker_layout
    at_import = graph(modules, edges, [MODULE])
    chain = figures.chain
    assert len(chain) >= 2 and len(set(chain)) == len(chain)
    for importer, imported in zip(chain, chain[1:], strict=False):
        lines = [e.line for e in edges if (e.source, e.target, e.kind)
                 == (importer, imported, MODULE)]
        assert lines, f"{importer} does not import {imported} at module level"
        source = modules[importer].path.read_text().splitlines()[lines[0] - 1]
        assert "import" in source, (importer, lines[0], source)
    if not figures.module_circles:  # a longest path of a DAG cannot be extended at either end
        assert not any(chain[0] in targets for targets in at_import.values())
        assert not at_import[chain[-1]]
    assert all(len(c) > 1 for c in figures.function_circles)
    assert figures.public_names > figures.modules
    assert figures.modules == sum(1 for p in (ROOT / "worker").rglob("*.py")
                                  if "__pycache__" not in p.parts)


def test_junits_imports_are_what_python_loads(
        worker_layout: tuple[Figures, dict[str, Module], list[Import]]) -> None:
    """The static closure of worker/report/junit.py is the set of worker/ modules (packages
    aside) that importing it loads in a fresh interpreter."""
    _, modules, edges = worker_layout
    junit = "worker.report.junit"
    static = {m for m in closure(graph(modules, edges, [MODULE]), junit)
              if not modules[m].is_package}
    probe = ("import json, sys; import worker.report.junit; print(json.dumps(sorted(name for "
             "name, m in sys.modules.items() if name.startswith('worker.') and not "
             "hasattr(m, '__path__'))))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    loaded = set(json.loads(done.stdout)) - {junit}
    assert static == loaded
