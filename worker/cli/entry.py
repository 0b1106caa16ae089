"""The ``llmgate`` console script: answers ``llmgate --version`` without importing the CLI.

``llmgate --version`` is what scripts and bug reports run first; it needs only the installed
distribution's version (worker/version.py), so it does not build the argument parser of
every command (worker/cli/main.py), which imports the commands' modules. Anything else is
handed to `worker.cli.main.main`. The goal is ≤ 0.15 s for ``--version`` and ``--help``
(issue 20); measured by hand with ``time llmgate --version``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from worker.cli.version_text import version_text


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``); returns the exit code.

    ``--version`` alone prints `version_text` (worker/cli/version_text.py) and returns 0
    (argparse's own ``--version`` in worker/cli/main.py prints the same text, for
    ``--version`` among other arguments).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        print(version_text())
        return 0
    from worker.cli.main import main as full_main

    return full_main(args)


#: Exit codes after Ctrl-C and SIGTERM (worker/cli/main.py ``EXIT_INTERRUPTED``,
#: ``EXIT_TERMINATED``), kept here so the entry point imports nothing more.
_STOPPED = (130, 143)


def console() -> None:
    """The ``llmgate`` console script and ``python -m worker.cli``: `main`, then exit.

    After Ctrl-C or SIGTERM (once temporary worktrees are removed), the process ends at once
    (``os._exit``) instead of waiting for an import of litellm under way in a thread to finish
    (worker/evals/llm/client.py `load_litellm`; the interpreter joins the thread at a normal
    exit): on a loaded CI runner that import took over a minute, and a cancelled job must
    stop now.
    """
    code = main()
    if code in _STOPPED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)


if __name__ == "__main__":
    console()
