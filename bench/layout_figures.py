"""Measure the layout of worker/ (and app/) from the code's own imports: issue 36's figures.

Static figures, from the standard library's `ast` (no module is imported):

- **Import graph.** A node is a module of the package (``worker.evals.run.engine``; a package
  is its ``__init__.py``). An edge A -> B is an ``import`` or ``from ... import`` in A that loads
  B: ``from P import name`` loads ``P.name`` when that is a module, the module P's lazy face maps
  ``name`` to (``lazy_loader.attach`` in ``P/__init__.py``: `face_map`), else ``P``. Importing B
  also runs its parent packages' ``__init__.py``, so an edge to each of those is added too, but
  only for an ``__init__.py`` that imports a module of the package (an empty one, one with only
  ``__all__``, or a lazy face, loads none) and not for A's own parents (loaded before A runs).
  Imports are sorted by where they stand: **module level** (run when A is imported),
  **function level** (inside a ``def``: run when it is called) and **typing** (under
  ``if TYPE_CHECKING:``: never run, not in any graph here). Imports of other packages (the
  standard library, app/ -> worker/contract.py) are not edges. (import-linter's graph, grimp,
  counts all three kinds alike, so it cannot tell a circle held by function-level imports from
  one at import time.)
- **Longest import chain**: the longest simple path of the module-level graph, counted in
  modules (A -> B -> C is 3). Found by dynamic programming over a topological order; when the
  graph has circles, over the graph of its strongly connected components (a circle counts as
  one module) and the chain printed takes one module of each.
- **Circles**: every strongly connected component of more than one module (Tarjan), of the
  module-level graph and of the graph with function-level imports too.
- **JUnit's imports**: the modules ``worker/report/junit.py`` loads transitively at module level
  (tests/test_layout_figures.py checks that this is the set Python loads, packages aside).
- **Public names**: names a module defines at top level (``def``, ``class``, assignments),
  not starting with ``_``; imported names are not counted.
- **Repeated file names**: a file name (not ``__init__.py``/``__main__.py``) that stands in
  more than one folder of the package; and of worker/ and app/ taken together.
- **Long functions**: functions (methods and nested ones too) of worker/pipeline/ and
  worker/gate/ over 60 lines, from the ``def`` line to the last line of the body.
- **Faces**: packages whose ``__init__.py`` assigns ``__all__``.

One traced figure (``--no-trace`` skips it): **modules run by one gate job**. A fresh child
process builds the tests' tiny repository (tests/unit/worker_support.py `build_tiny_repo`:
four examples, a command target), starts ``redis-server`` on a free loopback port and the
schema-checking fake GitHub of tests/fakes, and runs one ``gate_pull_request`` job (pull request
``pr/drop`` against ``main``, which fails) in an in-process arq burst worker, the way
tests/unit/jobs/ do. Around the job only, ``sys.setprofile`` and ``threading.setprofile``
record every code object that starts; the figure is the number of worker/ files with at least
one function among them (a code object with ``CO_OPTIMIZED``: functions and methods, not module
or class bodies). Imports before the job are not counted; functions of a module first imported
during the job are. Processes the job starts (git, the target command; the sandbox's set-up in
a forked child) are not traced. Two counts: the whole burst worker (its start-up, the job, its
shut-down, and what runs beside the job: the reconciler's start, metrics), and **the job
itself**: functions that run in the job's context (a context variable set when arq starts the
job, `arq.worker.Worker.run_job`, which the tasks and threads the job starts inherit). Files
that are not modules (the Jinja templates' compiled code) are not counted. The target runs
under the machine's default sandbox setting (``LLMGATE_SANDBOX``, ``auto`` when unset), which
the output states.

Usage: ``python -m bench.layout_figures [--root PATH] [--no-trace] [--json FILE]``; ``--root``
measures another tree (default: this repository), e.g. a ``git archive`` of an earlier commit;
the traced child then imports that tree (``PYTHONPATH``). The last line is
``longest_import_chain=<modules>``.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextvars
import inspect
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: Functions longer than this many lines are listed (issue 36: none over 60 in these packages).
FUNCTION_LINES = 60
#: The packages of worker/ whose long functions are listed.
LONG_FUNCTION_PACKAGES = ("pipeline", "gate")
MODULE, FUNCTION, TYPING = "module", "function", "typing"
Graph = dict[str, set[str]]


@dataclass(frozen=True)
class Module:
    """One module of a package.

    Attributes:
        name: dotted, e.g. ``worker.evals.run.engine``; a package's ``__init__.py`` is the
            package's name.
        path: its file.
        tree: its parsed source.
    """

    name: str
    path: Path
    tree: ast.Module

    @property
    def is_package(self) -> bool:
        """Whether this is a package's ``__init__.py``."""
        return self.path.name == "__init__.py"


@dataclass(frozen=True)
class Import:
    """One import statement's target inside the package: who imports what, where it stands.

    Attributes:
        source: the importing module's name.
        target: the loaded module's name.
        kind: `MODULE`, `FUNCTION` or `TYPING` (module docstring).
        line: the statement's line in ``source``.
    """

    source: str
    target: str
    kind: str
    line: int


def find_modules(root: Path, package: str) -> dict[str, Module]:
    """Return every module of ``root/package`` (``__pycache__`` skipped) by name, parsed.

    Raises:
        FileNotFoundError: ``root/package`` is not a folder.
        SyntaxError: a file does not parse.
    """
    base = root / package
    if not base.is_dir():
        raise FileNotFoundError(f"{base} is not a folder")
    modules = {}
    for path in sorted(base.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = path.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = Module(name, path, ast.parse(path.read_bytes(), str(path)))
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


#: The fields of a statement that hold statements (``if``, ``try``, ``with``, ``match``...).
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _statements(node: ast.AST, kind: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Yield every import statement under ``node`` with its kind, ``kind`` being the
    enclosing one (imports are statements: expressions are not searched)."""
    for block in _BLOCKS:
        for child in getattr(node, block, ()):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, kind
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from _statements(child, FUNCTION)
            elif isinstance(child, ast.If) and _is_type_checking(child.test) and kind == MODULE:
                yield from _statements(ast.Module(child.body, []), TYPING)
                yield from _statements(ast.Module(child.orelse, []), kind)
            else:
                yield from _statements(child, kind)


def _known_prefix(name: str, known: Mapping[str, Module]) -> str | None:
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return None


def _targets(module: Module, node: ast.Import | ast.ImportFrom,
             known: Mapping[str, Module]) -> set[str]:
    """Return the package's modules ``node`` loads itself (parents not added yet)."""
    if isinstance(node, ast.Import):
        found = (_known_prefix(alias.name, known) for alias in node.names)
        return {name for name in found if name}
    if node.level:
        package = module.name.split(".")
        package = package if module.is_package else package[:-1]
        package = package[:len(package) - node.level + 1]
        base = ".".join([*package, *([node.module] if node.module else [])])
    else:
        base = node.module or ""
    targets = set()
    for alias in node.names:
        if f"{base}.{alias.name}" in known:
            targets.add(f"{base}.{alias.name}")
        elif base in known and f"{base}.{face_map(known[base]).get(alias.name)}" in known:
            targets.add(f"{base}.{face_map(known[base])[alias.name]}")  # a lazy face's name
        elif (prefix := _known_prefix(base, known)) is not None:
            targets.add(prefix)
    return targets


def face_map(module: Module) -> dict[str, str]:
    """Return name -> submodule of a lazy face: the ``submod_attrs`` of a
    ``lazy_loader.attach(__name__, submodules=[...], submod_attrs={...})`` call in a package's
    ``__init__.py``, or its ``_FACE = {name: submodule}`` (worker/cli/__init__.py's face of the
    standard library); {} when it has neither. Importing the name runs that submodule."""
    found: dict[str, str] = {}
    for node in ast.walk(module.tree) if module.is_package else ():
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "attach":
            for keyword in node.keywords:
                if keyword.arg == "submod_attrs":
                    value = ast.literal_eval(keyword.value)
                    found.update({name: sub for sub, names in value.items() for name in names})
        elif isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == [
                "_FACE"]:
            found.update(ast.literal_eval(node.value))
    return found


def _runs_something(module: Module, known: Mapping[str, Module]) -> bool:
    """Whether a package's ``__init__.py`` imports a module of the package at module level
    (else loading it loads nothing of it: an empty one, one with only ``__all__``, a lazy
    face, whose ``lazy_loader.attach`` loads a module only when a name is asked for)."""
    return any(kind == MODULE and _targets(module, node, known)
               for node, kind in _statements(module.tree, MODULE))


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts))]


def _with_parents(source: str, target: str, known: Mapping[str, Module]) -> set[str]:
    """Return ``target`` and the parent packages loading it runs: those that import
    something and are not ``source``'s own (already loaded before ``source`` runs)."""
    loaded = {*_ancestors(source), source}
    return {target, *(p for p in _ancestors(target)
                      if p in known and p not in loaded and _runs_something(known[p], known))}


def imports(modules: Mapping[str, Module]) -> list[Import]:
    """Return every import edge inside the package (module docstring), in file order."""
    found = []
    for module in modules.values():
        for node, kind in _statements(module.tree, MODULE):
            for target in sorted(_targets(module, node, modules)):
                found += [Import(module.name, name, kind, node.lineno)
                          for name in sorted(_with_parents(module.name, target, modules))
                          if name != module.name]
    return found


def graph(modules: Mapping[str, Module], edges: Iterable[Import], kinds: Iterable[str]) -> Graph:
    """Return name -> names it imports, over every module, with the edges of ``kinds``."""
    wanted = set(kinds)
    result: Graph = {name: set() for name in modules}
    for edge in edges:
        if edge.kind in wanted:
            result[edge.source].add(edge.target)
    return result


def components(g: Mapping[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected components of ``g`` (Tarjan, iterative), each sorted;
    a component's members all reach each other. Every node is in exactly one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(g):
        if start in index:
            continue
        work = [(start, iter(sorted(g[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    found.append(_pop_component(stack, on_stack, node))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(g[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def _pop_component(stack: list[str], on_stack: set[str], root: str) -> list[str]:
    members = []
    while True:
        member = stack.pop()
        on_stack.discard(member)
        members.append(member)
        if member == root:
            return sorted(members)


def circles(g: Mapping[str, set[str]]) -> list[list[str]]:
    """Return the components of ``g`` of more than one module, largest first."""
    return sorted((c for c in components(g) if len(c) > 1), key=lambda c: (-len(c), c))


def longest_chain(g: Mapping[str, set[str]]) -> list[str]:
    """Return a longest chain of imports A -> B -> ... (module docstring), its first module
    first; a circle on it is one step, shown by one of its modules."""
    comps = components(g)  # Tarjan yields components in reverse topological order
    where = {name: i for i, comp in enumerate(comps) for name in comp}
    best: list[tuple[int, int | None]] = []  # per component: (length from it, next component)
    for i, comp in enumerate(comps):
        nexts = {where[t] for name in comp for t in g[name]} - {i}
        step = max(((best[j][0], -j) for j in nexts), default=(0, 0))
        best.append((step[0] + 1, -step[1] if nexts else None))
    if not best:
        return []
    at: int | None = max(range(len(comps)), key=lambda i: (best[i][0], -i))
    chain = []
    while at is not None:
        chain.append(comps[at][0])
        at = best[at][1]
    return _connect(chain, g)


def _connect(chain: list[str], g: Mapping[str, set[str]]) -> list[str]:
    """Pick, in each circle of ``chain``, a member imported by the previous link."""
    for i in range(1, len(chain)):
        if chain[i] not in g[chain[i - 1]]:
            comp = next(c for c in components(g) if chain[i] in c)
            chain[i] = next((m for m in comp if m in g[chain[i - 1]]), chain[i])
    return chain


def closure(g: Mapping[str, set[str]], start: str) -> set[str]:
    """Return every module ``start`` reaches in ``g`` (itself not included unless in a circle)."""
    seen: set[str] = set()
    todo = list(g[start])
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(g[name])
    return seen


def public_names(module: Module) -> list[str]:
    """Return the names ``module`` defines at top level, not starting with ``_``."""
    names = []
    for stmt in module.tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(stmt.name)
        elif isinstance(stmt, ast.Assign):
            names += [n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        elif isinstance(stmt, ast.AnnAssign | ast.AugAssign) and isinstance(stmt.target, ast.Name):
            names.append(stmt.target.id)
    return sorted({n for n in names if not n.startswith("_")})


def repeated_file_names(modules: Mapping[str, Module], root: Path) -> dict[str, list[str]]:
    """Return file name -> the folders holding it, for names in more than one folder."""
    folders: dict[str, list[str]] = {}
    for module in modules.values():
        if module.path.name not in ("__init__.py", "__main__.py"):
            folders.setdefault(module.path.name, []).append(
                module.path.parent.relative_to(root).as_posix())
    return {name: sorted(found) for name, found in sorted(folders.items()) if len(found) > 1}


def long_functions(modules: Mapping[str, Module], packages: Iterable[str],
                   limit: int = FUNCTION_LINES) -> list[tuple[str, int]]:
    """Return (``module:qualified.name``, lines) of the functions in ``packages`` (dotted
    names) over ``limit`` lines, longest first."""
    prefixes = tuple(f"{p}." for p in packages)
    found = []
    for module in modules.values():
        if module.name.startswith(prefixes):
            found += [(f"{module.name}:{name}", lines)
                      for name, lines in _function_lengths(module.tree, "") if lines > limit]
    return sorted(found, key=lambda item: (-item[1], item[0]))


def _function_lengths(node: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield f"{prefix}{child.name}", (child.end_lineno or child.lineno) - child.lineno + 1
            yield from _function_lengths(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _function_lengths(child, f"{prefix}{child.name}.")


def faces(modules: Mapping[str, Module]) -> list[str]:
    """Return the packages whose ``__init__.py`` assigns ``__all__``."""
    return sorted(m.name for m in modules.values() if m.is_package and any(
        isinstance(s, ast.Assign | ast.AnnAssign) and "__all__" in {
            n.id for n in ast.walk(s) if isinstance(n, ast.Name)} for s in m.tree.body))


@dataclass(frozen=True)
class Figures:
    """The static figures of one package (module docstring)."""

    modules: int
    packages: int
    chain: list[str]
    module_circles: list[list[str]]
    function_circles: list[list[str]]
    public_names: int
    repeated: dict[str, list[str]]
    faces: list[str]
    typing_imports: int
    function_imports: int


def measure(root: Path, package: str) -> tuple[Figures, dict[str, Module], list[Import]]:
    """Return the static figures of ``root/package``, its modules and its import edges."""
    modules = find_modules(root, package)
    edges = imports(modules)
    at_import = graph(modules, edges, [MODULE])
    figures = Figures(
        modules=len(modules), packages=sum(m.is_package for m in modules.values()),
        chain=longest_chain(at_import),
        module_circles=circles(at_import),
        function_circles=circles(graph(modules, edges, [MODULE, FUNCTION])),
        public_names=sum(len(public_names(m)) for m in modules.values()),
        repeated=repeated_file_names(modules, root), faces=faces(modules),
        typing_imports=sum(e.kind == TYPING for e in edges),
        function_imports=sum(e.kind == FUNCTION for e in edges))
    return figures, modules, edges


# ---------------------------------------------------------------- one traced gate job
CO_OPTIMIZED = inspect.CO_OPTIMIZED


def functions_run(codes: Iterable[CodeType], package_dir: Path) -> list[str]:
    """Return the files under ``package_dir`` (relative, sorted) with at least one function
    among ``codes`` (``CO_OPTIMIZED``: not a module's or a class's body)."""
    base = str(package_dir.resolve()) + os.sep
    return sorted({Path(c.co_filename).resolve().relative_to(package_dir.resolve()).as_posix()
                   for c in codes if c.co_flags & CO_OPTIMIZED and c.co_filename.endswith(".py")
                   and str(Path(c.co_filename).resolve()).startswith(base)})


@contextmanager
def _redis_server(work: Path) -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(work)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def trace_one_gate_job(root: Path) -> dict[str, Any]:
    """Run one gate job on the tiny repository, traced (module docstring); return
    ``{"modules": [worker-relative files], "conclusion": str, "sandbox": str}``.

    Imports ``tests.unit.worker_support`` and ``pytest`` (for its MonkeyPatch) of the
    environment; run it in a fresh process (`main` does) so no earlier call is cached.
    """
    import pytest
    from arq.worker import Worker

    from tests.unit import worker_support as ws

    seen: set[CodeType] = set()
    in_job: set[CodeType] = set()
    job_context: contextvars.ContextVar[bool] = contextvars.ContextVar("in_job", default=False)
    run_job = Worker.run_job

    async def marked_run_job(self: Worker, job_id: str, score: int) -> None:
        job_context.set(True)  # this task's context: the job's tasks and threads inherit it
        await run_job(self, job_id, score)

    def hook(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            seen.add(frame.f_code)
            if job_context.get():
                in_job.add(frame.f_code)

    with tempfile.TemporaryDirectory(prefix="layout-figures-") as tmp, \
            _redis_server(Path(tmp)) as redis_url:
        work = Path(tmp)
        shas = ws.build_tiny_repo(work / "tiny")
        patch = pytest.MonkeyPatch()
        try:
            with ws.fake_github_env(patch, redis_url, work / "worker") as github:
                payload = ws.gate_payload((work / "tiny").as_uri(), shas["pr/drop"],
                                          shas["main"])
                patch.setattr(Worker, "run_job", marked_run_job)
                threading.setprofile(hook)
                sys.setprofile(hook)
                try:
                    asyncio.run(ws.run_jobs([payload]))
                finally:
                    sys.setprofile(None)
                    threading.setprofile(None)
                runs = github.state()["check_runs"]
        finally:
            patch.undo()
    return {"modules": functions_run(seen, root / "worker"),
            "job_modules": functions_run(in_job, root / "worker"),
            "conclusion": runs[-1]["conclusion"] if runs else "no check run",
            "sandbox": os.environ.get("LLMGATE_SANDBOX", "auto")}


def traced(root: Path) -> dict[str, Any]:
    """Run `trace_one_gate_job` on ``root``'s code in a child process; return its answer.

    Raises:
        RuntimeError: the child failed (its stderr's tail is in the message).
    """
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--root", str(root),
                           "--trace-child"], cwd=root, env=env, capture_output=True, text=True,
                          check=False, timeout=600)
    if done.returncode:
        raise RuntimeError(f"the traced gate job failed: {done.stderr[-2000:]}")
    answer: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return answer


# ---------------------------------------------------------------- the table
def _rows(worker: Figures, app: Figures, junit: int) -> list[tuple[str, str, str]]:
    def n_circles(c: list[list[str]]) -> str:
        return f"{len(c)} ({', '.join(str(len(x)) for x in c)} modules)" if c else "0"

    return [
        ("modules (.py files, __init__.py included)", str(worker.modules), str(app.modules)),
        ("  of which __init__.py", str(worker.packages), str(app.packages)),
        ("longest import chain (modules, module level)", str(len(worker.chain)),
         str(len(app.chain))),
        ("import circles, module level", n_circles(worker.module_circles),
         n_circles(app.module_circles)),
        ("import circles, with function-level imports", n_circles(worker.function_circles),
         n_circles(app.function_circles)),
        ("function-level import edges", str(worker.function_imports),
         str(app.function_imports)),
        ("TYPE_CHECKING import edges", str(worker.typing_imports), str(app.typing_imports)),
        ("worker/report/junit.py imports (transitive, module level)", str(junit), "-"),
        ("public names", str(worker.public_names), str(app.public_names)),
        ("file names repeated across folders", str(len(worker.repeated)),
         str(len(app.repeated))),
        ("packages with __all__", f"{len(worker.faces)}", f"{len(app.faces)}"),
    ]


def report(root: Path, trace: bool) -> dict[str, Any]:
    """Print the figures of ``root`` (module docstring) and return them as a document."""
    worker, modules, edges = measure(root, "worker")
    app, app_modules, _ = measure(root, "app")
    at_import = graph(modules, edges, [MODULE])
    junit = "worker.report.junit"
    junit_n = len(closure(at_import, junit) - {junit}) if junit in at_import else -1
    rows = _rows(worker, app, junit_n)
    both = repeated_file_names({**modules, **app_modules}, root)
    rows.append(("file names repeated across folders of worker/ and app/ together",
                 str(len(both)), "-"))
    long = long_functions(modules, [f"worker.{p}" for p in LONG_FUNCTION_PACKAGES])
    job = traced(root) if trace else None
    if job is not None:
        rows.append((f"worker/ modules whose functions run in one gate job's burst worker "
                     f"(sandbox {job['sandbox']})", str(len(job["modules"])), "-"))
        rows.append(("  of which in the job itself (its context)", str(len(job["job_modules"])),
                     "-"))
    width = max(len(r[0]) for r in rows)
    print(f"layout of {root}")
    print(f"{'figure':<{width}}  {'worker/':>12}  {'app/':>6}")
    for name, w, a in rows:
        print(f"{name:<{width}}  {w:>12}  {a:>6}")
    print(f"\nlongest import chain ({len(worker.chain)}): {' -> '.join(worker.chain)}")
    for label, found in (("module level", worker.module_circles),
                         ("with function-level imports", worker.function_circles)):
        for comp in found:
            print(f"circle ({label}): {' - '.join(comp)}")
    print(f"\nfunctions over {FUNCTION_LINES} lines in worker/{{pipeline,gate}}/: {len(long)}")
    for name, lines in long:
        print(f"  {name} {lines}")
    print(f"repeated file names ({len(worker.repeated)}): "
          + ", ".join(f"{n} ({len(f)})" for n, f in worker.repeated.items()))
    print(f"packages with __all__: {', '.join(worker.faces + app.faces) or 'none'}")
    if job is not None:
        print(f"one gate job (tiny repository, pr/drop against main, {job['conclusion']}): "
              f"{len(job['modules'])} of {worker.modules} worker/ modules run functions, "
              f"{len(job['job_modules'])} in the job itself")
    print(f"longest_import_chain={len(worker.chain)}")
    return {"worker": worker.__dict__, "app": app.__dict__, "junit_imports": junit_n,
            "repeated_worker_and_app": both, "long_functions": long, "gate_job": job}


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, print the figures; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the tree to measure (default: this repository)")
    parser.add_argument("--no-trace", action="store_true",
                        help="static figures only: no traced gate job")
    parser.add_argument("--json", type=Path, help="also write the figures here as JSON")
    parser.add_argument("--trace-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if args.trace_child:
        print(json.dumps(trace_one_gate_job(root)))
        return 0
    document = report(root, not args.no_trace)
    if args.json:
        args.json.write_text(json.dumps(document, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
