"""The two errors every stage may raise: the user's config is wrong, or the run could not happen.

They sit at the bottom of the worker (no imports of llmgate) so that the edges that raise them
(reading repository files, redaction) need not import the eval engine.
"""

from __future__ import annotations


class ConfigError(Exception):
    """A configuration or dataset problem that a user must fix in a file of the repository.

    Attributes:
        path: the file, relative to the repository root (POSIX separators).
        line: the 1-based line of the problem, or None when no line applies (a missing file).
        message: what is wrong and how to fix it, one sentence or two.
    """

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        self.message = message
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")


class ExecutionError(Exception):
    """The run itself could not happen (git failed, a checkout vanished); not the user's config."""
