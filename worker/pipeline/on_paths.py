"""Which suites a pull request needs: ``on_paths`` globs against the changed files (pure).

A suite with ``on_paths`` (as configured at BASE: a pull request cannot switch off its own
gate) runs only when the pull request changes a matching file. The changed files are the diff
between the merge base and head (what "Files changed" shows), computed by git in the worker.
Whatever ``on_paths`` says, a suite also runs when the pull request changes the config file or
a file the suite names at base or head (its dataset, prompt, traps, or a file on its command
line), so moving a suite onto new files cannot skip it.

A suite with a command target also runs when the pull request changes any file its
interpreter could load as code, anywhere in the repository, whatever ``on_paths`` says
(`is_code`: a name ending in `CODE_SUFFIXES`, a `MANIFESTS` file, a start-up hook of
`STARTUP_HOOKS`, or anything in a `CODE_FOLDERS` folder). Issue 30, found by a tester: a new
``json.py`` at the repository root shadowed the standard library of a Python target whose
``on_paths`` named only its own folders, so every suite was skipped and the check passed. A
rule for where an interpreter looks (the root, beside a script) missed the next ones: bytecode
in ``__pycache__`` beside an unchanged source, ``json/__init__.abi3.so``, a folder put on
``PYTHONPATH`` or made the working directory by the command line. So only an explicit
statement of base's owner leaves a code file out: the last glob of base's ``on_paths`` that
matches it is a ``!`` glob (``!services/other/**`` in a monorepo; `excluded`). Other files
(``README.md``, ``docs/*.md``, data) are left to ``on_paths``; a model target loads no code.

``.json`` is no code suffix: neither Python's import nor Node's ``require`` runs it (``require``
parses it as data, like any data file the target reads, which ``on_paths`` governs), and
counting it would make every fixture or locale file run every suite. ``package.json`` is
counted wherever it is (`MANIFESTS`): its ``main``, ``exports``, ``imports`` and ``type``
choose which code Node loads and how it parses it.

The glob syntax is worker/evals/config/paths.py's (`glob_regex`), where the config reader
checks each glob: a pattern starting with ``!`` excludes what it matches, and later patterns
win (`matches`).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from worker.evals.config import glob_regex
from worker.evals.types import CommandTarget, Config, SuiteConfig

#: Names of the changed files shown in a skip reason at most.
SHOWN_FILES = 3
#: Name endings of files an interpreter loads as code: Python source, bytecode, extension
#: modules and ``.pth`` start-up files; Node scripts, native addons, and TypeScript, which
#: Node 23.6+ runs natively (type stripping).
CODE_SUFFIXES = (".py", ".pyc", ".pyd", ".so", ".pth", ".js", ".cjs", ".mjs", ".node", ".ts",
                 ".mts", ".cts")
#: Module names Python's ``site`` imports at start-up from anywhere on its path.
STARTUP_HOOKS = ("sitecustomize", "usercustomize")
#: Folders whose files are all code an interpreter may load (bytecode caches; Node's packages).
CODE_FOLDERS = ("__pycache__", "node_modules")
#: Files that choose which code an interpreter loads (Node's package manifest).
MANIFESTS = ("package.json",)


@dataclass(frozen=True)
class Selection:
    """The suites to run and why the others are skipped.

    Attributes:
        run: names of the suites that run (head config order).
        skipped: suite name -> why it is skipped (one sentence).
    """

    run: tuple[str, ...]
    skipped: dict[str, str]


def matches(patterns: Sequence[str], path: str) -> bool:
    """Return True when ``path`` is selected by ``patterns`` (the last matching glob decides;
    a ``!`` glob deselects)."""
    selected = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        if glob_regex(pattern[1:] if negated else pattern).match(path):
            selected = not negated
    return selected


def select_suites(head: Config, base: Config | None, changed: Sequence[str]) -> Selection:
    """Decide which of ``head``'s suites run for a pull request changing ``changed``.

    Args:
        head: the head config (its suites are the ones that may run).
        base: the base config, whose ``on_paths`` apply; None runs every suite.
        changed: the changed files (repository paths, POSIX), merge base to head.

    Returns:
        The suites to run and the reasons of the skipped ones.
    """
    base_suites = {s.name: s for s in base.suites} if base is not None else {}
    config_changed = head.path in changed or (base is not None and base.path in changed)
    run, skipped = [], {}
    for suite in head.suites:
        rule = base_suites.get(suite.name)
        if rule is None or not rule.on_paths or config_changed \
                or _own_files(suite, rule) & set(changed) \
                or any(_runs_code(suite, rule) and is_code(path)
                       and not excluded(rule.on_paths, path) for path in changed) \
                or any(matches(rule.on_paths, path) for path in changed):
            run.append(suite.name)
        else:
            skipped[suite.name] = _reason(suite.name, rule.on_paths, changed)
    return Selection(tuple(run), skipped)


def restrict(config: Config, names: Iterable[str]) -> Config:
    """Return ``config`` with only the suites named in ``names``."""
    keep = set(names)
    return replace(config, suites=tuple(s for s in config.suites if s.name in keep))


def _own_files(*suites: SuiteConfig) -> set[str]:
    """Files a suite names: its dataset, prompt, traps and files on its command line."""
    files: set[str] = set()
    for suite in suites:
        files.add(suite.dataset)
        files.update(p for p in (getattr(suite.target, "prompt", None), suite.traps) if p)
        files.update(_command_files(suite))
    return files


def _command_files(suite: SuiteConfig) -> set[str]:
    """The words of a command target's command line that may be files (none for a model)."""
    if not isinstance(suite.target, CommandTarget):
        return set()
    try:
        words = shlex.split(suite.target.command)
    except ValueError:
        words = []
    return {w for w in words if "{" not in w and not w.startswith("-")}


def is_code(path: str) -> bool:
    """Whether an interpreter could load the repository file ``path`` as code (module doc):
    its name ends in `CODE_SUFFIXES`, is a `MANIFESTS` file or a `STARTUP_HOOKS` module, or it
    is inside a `CODE_FOLDERS` folder."""
    *folders, name = path.split("/")
    return (name.endswith(CODE_SUFFIXES) or name in MANIFESTS
            or name.partition(".")[0] in STARTUP_HOOKS
            or any(folder in CODE_FOLDERS for folder in folders))


def excluded(patterns: Sequence[str], path: str) -> bool:
    """Whether the last glob of ``patterns`` that matches ``path`` is a ``!`` glob (the owner
    says the path cannot change the suite)."""
    last = None
    for pattern in patterns:
        negated = pattern.startswith("!")
        if glob_regex(pattern[1:] if negated else pattern).match(path):
            last = negated
    return last is True


def _runs_code(*suites: SuiteConfig) -> bool:
    """Whether the suite has a command target at base or head (a model target loads no code)."""
    return any(isinstance(suite.target, CommandTarget) for suite in suites)


def _reason(name: str, on_paths: Sequence[str], changed: Sequence[str]) -> str:
    globs = f"its on_paths ({', '.join(on_paths)})"
    if not changed:
        return f"suite {name} skipped: the pull request changes no file, so none matches {globs}"
    shown = ", ".join(changed[:SHOWN_FILES]) + (
        f" and {len(changed) - SHOWN_FILES} more" if len(changed) > SHOWN_FILES else "")
    if len(changed) == 1:
        return f"suite {name} skipped: the changed file ({shown}) matches none of {globs}"
    return (f"suite {name} skipped: none of the {len(changed)} changed files ({shown}) "
            f"matches {globs}")
