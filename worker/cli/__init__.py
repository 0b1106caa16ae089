"""The llmgate command: run, serve, worker, demo, setup, healthcheck, calibrate.

Face (``__all__``, worker/README.md's import rule 7): what other packages import of this
one, each name loaded from its module on first use. Unlike the other faces it is written with
the standard library (`importlib`), not lazy_loader: this package runs first in every ``llmgate``
command, and ``llmgate --version`` must answer with no dependency installed (the GitHub
Action's install check, tests/unit/cli/test_github_action_install.py).
"""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from worker.cli.main import gate_locally as gate_locally
    from worker.cli.main import refusal as refusal
    from worker.cli.main import run_arguments as run_arguments
    from worker.cli.main import run_exit_code as run_exit_code
    from worker.cli.repository import is_repository as is_repository
    from worker.cli.repository import repo_root as repo_root

#: Name -> the module of this package that defines it.
_FACE = {
    "gate_locally": "main", "refusal": "main", "run_arguments": "main", "run_exit_code": "main",
    "is_repository": "repository", "repo_root": "repository",
}
__all__ = sorted(_FACE)


def __getattr__(name: str) -> object:
    """Return ``name`` of the face, importing its module on first use (PEP 562).

    Raises:
        AttributeError: ``name`` is not in the face.
    """
    if name not in _FACE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_FACE[name]}"), name)
    globals()[name] = value
    return value
