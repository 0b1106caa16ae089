"""The line ``llmgate --version`` prints, shared by the console script (worker/cli/entry.py,
which answers ``--version`` alone without importing the CLI) and the full command line
(worker/cli/main.py, for ``--version`` among other arguments). It imports nothing at import
time, so the console script stays fast (issue 20)."""

from __future__ import annotations


def version_text() -> str:
    """Return ``llmgate X.Y.Z``, as ``--version`` prints: worker/version.py's `VERSION`, which
    is also the installed distribution's version (pyproject.toml reads it from there)."""
    from worker.version import VERSION

    return f"llmgate {VERSION}"
