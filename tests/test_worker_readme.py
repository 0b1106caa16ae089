"""The map matches the code: every path worker/README.md names exists (issue 36).

worker/README.md (and app/README.md, when there is one) names modules as paths from the
repository root (``worker/gate/run.py``), functions and classes as ``path.py:name`` and methods as
``path.py:Class.method``; a ``.py`` path without ``worker/`` or ``app/`` in front is looked up under
``worker/``, then ``app/``, then the root. The docstrings and comments of ``worker/`` and
``app/`` name paths the same way (``worker/gate/shards.py``,
``worker/security/text_fold.drop_invisible``): each must exist too, so a move or a rename
updates every word about it in the same commit.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The architecture notes whose every path is checked (a missing one is skipped).
NOTES = ("worker/README.md", "app/README.md")
#: The packages whose sources' full paths (``worker/...``, ``app/...``) are checked.
PACKAGES = ("worker", "app")
PACKAGES_SLASH = tuple(f"{package}/" for package in PACKAGES)

#: A full path (``worker/...``, ``app/...``: a file, a folder, or ``module.name``) or a relative
#: ``.py`` path (``gate/run.py``), either optionally followed by ``:name`` or ``:Class.method``.
#: A path ends on a letter, digit, ``_`` or ``/``, so a sentence's full stop is not part of it.
REFERENCE = re.compile(
    r"(?<![\w./<>-])"
    r"((?:worker|app)/[\w./-]*[\w/]|(?:[\w-]+/)+[\w-]+\.py)"
    r"(?::([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*))?")


@dataclass(frozen=True)
class Reference:
    """One path a text names.

    Attributes:
        path: the path as written (``worker/gate/run.py``, ``gate/run.py``, ``app/routes/``).
        name: the function, class or ``Class.method`` after ``:``, "" for none.
        line: the 1-based line of the text it is on.
    """

    path: str
    name: str
    line: int


def references(text: str, *, relative: bool = True) -> list[Reference]:
    """Return every path ``text`` names, in order (module docstring for the forms).

    Args:
        text: markdown or Python source.
        relative: also return ``.py`` paths without ``worker/`` or ``app/`` in front (the
            README's short forms); False for Python sources, whose docstrings also name paths
            in the user's repository (``evals/metrics.py``).
    """
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in REFERENCE.finditer(line):
            path, name = match.group(1), match.group(2) or ""
            if relative or path.startswith(PACKAGES_SLASH):
                found.append(Reference(path, name, number))
    return found



def problem(ref: Reference) -> str | None:
    """Return why ``ref`` names nothing in the repository, or None when it does."""
    candidates = [ROOT / ref.path] if ref.path.startswith(PACKAGES_SLASH) else \
        [ROOT / "worker" / ref.path, ROOT / "app" / ref.path, ROOT / ref.path]
    found = next((path for path in candidates if path.exists()), None)
    if found is None:
        if not ref.name and "." in ref.path.rsplit("/", 1)[-1]:  # worker/x/module.function
            module, _, name = ref.path.rpartition(".")
            if (ROOT / f"{module}.py").is_file() and defines(ROOT / f"{module}.py", name):
                return None
        return f"{ref.path} does not exist"
    if not ref.name:
        return None
    if found.suffix != ".py" or not found.is_file():
        return f"{ref.path}:{ref.name}: {ref.path} is not a Python module"
    if not defines(found, ref.name):
        return f"{ref.path}:{ref.name}: {ref.path} defines no {ref.name}"
    return None


def defines(module: Path, name: str) -> bool:
    """Whether ``module`` defines ``name`` at its top level (a function, a class or an assigned
    name), or ``Class.member`` (a method, a class attribute or a dataclass field); an imported
    name does not count."""
    scope: list[ast.stmt] = _tree(module).body
    *classes, last = name.split(".")
    for part in classes:
        found = next((node for node in scope
                      if isinstance(node, ast.ClassDef) and node.name == part), None)
        if found is None:
            return False
        scope = found.body
    return last in _names(scope)


@cache
def _tree(module: Path) -> ast.Module:
    return ast.parse(module.read_text(encoding="utf-8"))


def _names(body: list[ast.stmt]) -> set[str]:
    """The names a module's or class's body defines (not those it imports)."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def problems(text: str, where: str, *, relative: bool = True) -> list[str]:
    """Return one line per path of ``text`` that names nothing: ``where:line: why``."""
    return [f"{where}:{ref.line}: {why}" for ref in references(text, relative=relative)
            if (why := problem(ref)) is not None]


def test_every_path_the_notes_name_exists() -> None:
    notes = [ROOT / note for note in NOTES if (ROOT / note).is_file()]
    assert notes, "worker/README.md is missing"
    found = [line for note in notes
             for line in problems(note.read_text(encoding="utf-8"),
                                  note.relative_to(ROOT).as_posix())]
    assert not found, "paths the README names that do not exist:\n" + "\n".join(found)


def test_the_readme_names_the_path_of_a_pull_request() -> None:
    """The stages issue 36 asked the README to show, by their modules."""
    text = (ROOT / "worker" / "README.md").read_text(encoding="utf-8")
    named = {ref.path for ref in references(text)}
    for module in ("worker/pipeline/sides.py", "worker/gate/shards.py", "worker/jobs/shard.py",
                   "worker/gate/reconcile.py", "worker/gate/sweeper.py",
                   "worker/gate/supersede.py", "worker/gate/history_record.py"):
        assert module in named, f"worker/README.md does not name {module}"
    assert "## Feature index" in text


def test_every_path_the_sources_name_exists() -> None:
    found = []
    for package in PACKAGES:
        for source in sorted((ROOT / package).rglob("*.py")):
            found += problems(source.read_text(encoding="utf-8"),
                              source.relative_to(ROOT).as_posix(), relative=False)
    assert not found, "paths the docstrings and comments name that do not exist:\n" + \
        "\n".join(found)


def test_the_extractor_reads_every_form() -> None:
    text = ("Runs `worker/gate/run.py:run_gate` (in `worker/gate/run.py`), then\n"
            "`gate/evaluate.py` and `worker/checkout.py:Checkouts.worktree`; see worker/gate/.\n"
            "A path at a sentence's end: worker/gate/shards.py. Not paths: opened/synchronize,\n"
            "`owner/repo#PR@head_sha`, `GET /app`, <out>/index.html.\n")
    assert [(r.path, r.name, r.line) for r in references(text)] == [
        ("worker/gate/run.py", "run_gate", 1), ("worker/gate/run.py", "", 1),
        ("gate/evaluate.py", "", 2), ("worker/checkout.py", "Checkouts.worktree", 2),
        ("worker/gate/", "", 2), ("worker/gate/shards.py", "", 3)]
    assert [r.path for r in references(text, relative=False)] == [
        "worker/gate/run.py", "worker/gate/run.py", "worker/checkout.py", "worker/gate/",
        "worker/gate/shards.py"]


def test_real_paths_pass() -> None:
    text = ("`worker/gate/run.py:run_gate`, `gate/evaluate.py`, `jobs/shard.py:answer_shard`,\n"
            "`worker/checkout.py:Checkouts.worktree`, `worker/gate/shards.py:SHARD_TTL_S`,\n"
            "`worker/gate/shards.py:RedisShards.gate_id`, `routes/pull_request.py`,\n"
            "`app/routes/`, `worker/security/text_fold.drop_invisible`, `tests/test_lint.py`\n")
    assert problems(text, "t") == []


def test_made_up_paths_fail_by_name() -> None:
    text = ("`worker/gate/nowhere.py` and `gate/elsewhere.py`\n"
            "`worker/gate/run.py:no_such_function`, `worker/checkout.py:Checkouts.no_method`\n"
            "`worker/checkout.py:NoClass.worktree`, `worker/gate/:run_gate`,\n"
            "`worker/security/text_fold.no_such_function`,\n"
            "`worker/jobs/pull_request.py:Services`\n")
    assert problems(text, "README.md") == [
        "README.md:1: worker/gate/nowhere.py does not exist",
        "README.md:1: gate/elsewhere.py does not exist",
        "README.md:2: worker/gate/run.py:no_such_function: worker/gate/run.py defines no "
        "no_such_function",
        "README.md:2: worker/checkout.py:Checkouts.no_method: worker/checkout.py defines no "
        "Checkouts.no_method",
        "README.md:3: worker/checkout.py:NoClass.worktree: worker/checkout.py defines no "
        "NoClass.worktree",
        "README.md:3: worker/gate/:run_gate: worker/gate/ is not a Python module",
        "README.md:4: worker/security/text_fold.no_such_function does not exist",
        # imported, not defined there: the README must name the module that defines it
        "README.md:5: worker/jobs/pull_request.py:Services: worker/jobs/pull_request.py "
        "defines no Services"]
