"""Find the git repository a command runs in: the top of the checkout at or above a folder.

Imported by the command line (worker/cli/main.py) and its commands (worker/cli/baseline.py),
and through the package's face by llmgate/api.py and llmgate/pytest_plugin.py, so it imports
nothing of them.
"""

from __future__ import annotations

from pathlib import Path


def is_repository(folder: Path) -> bool:
    """Return whether ``folder`` is the top of a git checkout: its ``.git`` is a folder
    holding ``HEAD``, or the ``gitdir:`` file of a worktree or submodule."""
    dot_git = folder / ".git"
    return dot_git.is_file() or (dot_git / "HEAD").is_file()


def repo_root(start: Path) -> Path:
    """Return the nearest directory at or above ``start`` that `is_repository`; else ``start``.

    So ``llmgate run`` finds ``.llmgate.yml`` at the repository root from any subdirectory.
    """
    start = start.absolute()
    return next((d for d in (start, *start.parents) if is_repository(d)), start)
