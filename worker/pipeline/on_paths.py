"""Which suites a pull request needs: ``on_paths`` globs against the changed files (pure).

A suite with ``on_paths`` (as configured at BASE: a pull request cannot switch off its own
gate) runs only when the pull request changes a matching file. The changed files are the diff
between the merge base and head (what "Files changed" shows), computed by git in the worker.
Whatever ``on_paths`` says, a suite also runs when the pull request changes the config file or
a file the suite names at base or head (its dataset, prompt, traps, or a file on its command
line), so moving a suite onto new files cannot skip it.

A suite with a command target also runs when the pull request changes a file its interpreter
may load before the target's own code, whatever ``on_paths`` says (issue 30, found by a tester:
a new ``json.py`` at the repository root shadowed the standard library of a Python target whose
``on_paths`` named only its own folders, so every suite was skipped and the check passed):
a module or package at the repository root (the target's working directory, first on Python's
``sys.path`` under ``python -m``; `MODULE_SUFFIXES`, `PACKAGE_FILES`) or in the folder of a
script named on its command line (first on ``sys.path`` for ``python path/script.py``), an
interpreter start-up hook anywhere (`STARTUP_HOOKS`: ``sitecustomize.py``, ``usercustomize.py``,
``*.pth``), and anything in a ``node_modules`` folder (Node searches them up the tree). Other
files (``README.md`` at the root) are left to ``on_paths``.

The glob syntax is worker/evals/config/paths.py's (`glob_regex`), where the config reader
checks each glob: a pattern starting with ``!`` excludes what it matches, and later patterns
win (`matches`).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from worker.evals.config.paths import glob_regex
from worker.evals.types import CommandTarget, Config, SuiteConfig

#: Names of the changed files shown in a skip reason at most.
SHOWN_FILES = 3
#: Files an interpreter loads at start-up wherever they are on its path (Python's ``site``
#: module: ``sitecustomize``, ``usercustomize`` and ``.pth`` files).
STARTUP_HOOKS = ("sitecustomize.py", "usercustomize.py", ".pth")
#: Files an interpreter imports by module name from a folder on its path (Python: source,
#: bytecode and extension modules; Node: scripts, JSON and native addons).
MODULE_SUFFIXES = (".py", ".pyc", ".pyd", ".so", ".js", ".cjs", ".mjs", ".json", ".node")
#: The file that makes a folder an importable package (Python) or module (Node).
PACKAGE_FILES = ("__init__.py", "__init__.pyc", "package.json", "index.js")


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
                or any(_loaded_first(suite, path) or _loaded_first(rule, path)
                       for path in changed) \
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


def _loaded_first(suite: SuiteConfig, path: str) -> bool:
    """Whether a command target's interpreter may load ``path`` before its own code (module
    doc): a module or package at the root or beside a script on its command line, a start-up
    hook, or anything in a ``node_modules`` folder."""
    if not isinstance(suite.target, CommandTarget):
        return False
    parts = path.split("/")
    if parts[-1].endswith(STARTUP_HOOKS) or "node_modules" in parts[:-1]:
        return True
    folders = {""} | {f.rpartition("/")[0].removeprefix("./") for f in _command_files(suite)}
    for folder in folders:
        rest = path.removeprefix(f"{folder}/").split("/") if folder else parts
        if folder and not path.startswith(f"{folder}/"):
            continue
        if (len(rest) == 1 and rest[0].endswith(MODULE_SUFFIXES)) or (
                len(rest) == 2 and rest[1] in PACKAGE_FILES):
            return True
    return False


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
