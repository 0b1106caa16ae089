"""No import circle in app/ and worker/, counting imports inside functions too (issue 36).

import-linter's contracts (tests/test_lint.py) keep the packages' layers; they do not see a
circle inside one package, nor one held only by an import inside a function, which Python
runs later and so lets by. Such a circle still ties its modules into one: none can be read,
tested or moved without the others. The graph is bench/layout_figures.py's (its functions,
not a copy): module-level and function-level imports; imports under ``TYPE_CHECKING`` never
run and are left out. Lazy imports for start-up speed are fine as long as they close no
circle.
"""

from __future__ import annotations

from pathlib import Path

from bench.layout_figures import FUNCTION, MODULE, circles, find_modules, graph, imports
from tests.test_layout_figures import write_tree

ROOT = Path(__file__).resolve().parent.parent
#: The packages whose imports are checked, together (an import across them counts).
OURS = ("app", "worker")


def import_circles(root: Path, packages: tuple[str, ...] = OURS) -> list[str]:
    """Return one line per import circle among ``packages`` under ``root``: the modules of
    each strongly connected component of more than one module, largest first.

    Raises:
        FileNotFoundError: a package is not a folder under ``root``.
        SyntaxError: a module does not parse.
    """
    modules = {name: module for package in packages
               for name, module in find_modules(root, package).items()}
    at_run = graph(modules, imports(modules), [MODULE, FUNCTION])
    return [" - ".join(circle) for circle in circles(at_run)]


def test_no_import_circle_in_app_and_worker() -> None:
    found = import_circles(ROOT)
    assert found == [], "import circles (module or function level), break each by moving " \
        "the shared part down or passing a function in:\n" + "\n".join(found)


def test_a_made_up_circle_is_named(tmp_path: Path) -> None:
    """worker.a -> worker.b at import, worker.b -> worker.a in a function: one circle; app.x
    -> worker.c -> app.x (in a function) across the packages: another; worker.d -> worker.a
    in a function closes nothing, and worker.e <-> worker.a under TYPE_CHECKING never runs."""
    write_tree(tmp_path, {
        "worker/__init__.py": "",
        "worker/a.py": "from worker import b\n",
        "worker/b.py": "def later():\n    from worker.a import b\n    return b\n",
        "worker/c.py": "def later():\n    import app.x\n    return app.x\n",
        "worker/d.py": "def later():\n    from worker import a\n    return a\n",
        "worker/e.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                       "    from worker import a\n",
        "app/__init__.py": "",
        "app/x.py": "from worker.c import later\n",
    })
    assert import_circles(tmp_path) == ["app.x - worker.c", "worker.a - worker.b"]
    (tmp_path / "worker/b.py").write_text("X = 1\n")  # the circle broken
    (tmp_path / "app/x.py").write_text("X = 1\n")
    assert import_circles(tmp_path) == []
