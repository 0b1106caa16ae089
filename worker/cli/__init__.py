"""The llmgate command: run, serve, worker, demo, setup, healthcheck, calibrate.

Face (``__all__``, worker/README.md's import rule 7): what other packages import of this
one, each name loaded from its module on first use.
"""

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:
    from worker.cli.main import gate_locally as gate_locally
    from worker.cli.main import refusal as refusal
    from worker.cli.main import run_arguments as run_arguments
    from worker.cli.main import run_exit_code as run_exit_code
    from worker.cli.repository import is_repository as is_repository
    from worker.cli.repository import repo_root as repo_root

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=[],
    submod_attrs={
        'main': ['gate_locally', 'refusal', 'run_arguments', 'run_exit_code'],
        'repository': ['is_repository', 'repo_root'],
    },
)
