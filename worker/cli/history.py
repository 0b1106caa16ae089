"""``llmgate history``: the dashboard as static files, from a baseline store, without the App.

``llmgate history --store STORE --out site/`` reads every record of a baseline store
(worker/baselines/local.py: a directory, ``redis`` or ``git[:refs/llmgate/NAME]``, as
``llmgate run --baseline-store`` and ``llmgate baseline push`` keep them), builds the default
branch's runs from them (one run per commit, as the worker records a push) and writes the
dashboard's pages with its own templates (worker/cli/history_site.py): a folder to publish on
GitHub Pages or any static host, its links relative so it works under any path.

Exit codes: 0 written (an empty store writes an index that says so), 2 the store cannot be read,
``--out`` is a non-empty folder that is not an earlier export (without ``--force``), or a file
cannot be written; one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from worker.errors import ExecutionError

if TYPE_CHECKING:
    from worker.baselines import Baseline

HELP = "write the quality dashboard as static files from a baseline store"
DESCRIPTION = (
    "Read every record of a baseline store and write the dashboard's pages (the repositories, "
    "each repository's trends, one page per commit, history.csv, index.json) as static files "
    "with relative links, to publish on GitHub Pages or any static host. A static site has "
    "no sign-in: whoever can read the folder reads every page, so publish only what you "
    "would show to all its readers (a private repository's Pages site is private only on "
    "plans that offer it).")


def add_history_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``llmgate history``."""
    history = sub.add_parser("history", help=HELP, description=DESCRIPTION)
    history.add_argument("--store", required=True, metavar="STORE",
                         help="the baseline store to read: a directory, 'redis' (REDIS_URL) or "
                              "'git' / 'git:refs/llmgate/NAME' (a ref of the repository in the "
                              "current folder)")
    history.add_argument("--out", required=True, type=Path, metavar="DIR",
                         help="the folder to write (created; an earlier export is written "
                              "again)")
    history.add_argument("--repo", default=None, metavar="OWNER/NAME",
                         help="show only this repository; records kept under 'local' (no "
                              "GITHUB_REPOSITORY) are shown under this name (default "
                              "local/repository)")
    history.add_argument("--branch", default=None,
                         help="the default branch: pushes to other branches are left out "
                              "(default: every push; base runs of `llmgate run --base` always "
                              "count)")
    history.add_argument("--force", action="store_true",
                         help="write into a non-empty folder that is not an earlier export")
    history.set_defaults(func=cmd_history)


def _refusal(out: Path, force: bool) -> str | None:
    """Why ``--out`` must not be written, or None."""
    from worker.cli.history_site import MARKER

    if out.exists() and not out.is_dir():
        return f"--out {out}: not a folder"
    if force or not out.is_dir() or (out / MARKER).is_file():
        return None
    if any(out.iterdir()):
        return (f"--out {out} is a non-empty folder that is not an earlier `llmgate history` "
                "export; choose another or add --force")
    return None


def cmd_history(args: argparse.Namespace) -> int:
    """Write the static dashboard (see the module docstring); return the exit code."""
    import asyncio

    from worker.baselines import every_record, open_store
    from worker.cli.history_site import branch_runs, write_site

    refused = _refusal(args.out, args.force)
    if refused is not None:
        print(f"llmgate: {refused}", file=sys.stderr)
        return 2
    if args.repo is not None and args.repo.count("/") != 1:
        print(f"llmgate: --repo {args.repo}: expected OWNER/NAME", file=sys.stderr)
        return 2

    async def read() -> list[Baseline]:
        store, redis = open_store(args.store, Path.cwd(), os.environ)
        try:
            return await every_record(store)
        finally:
            if redis is not None:
                await redis.aclose()

    try:
        records = asyncio.run(read())
    except ExecutionError as err:
        print(f"llmgate: {err}", file=sys.stderr)
        return 2
    history = branch_runs(records, args.branch, args.repo)
    if args.repo is not None:
        history = {repo: runs for repo, runs in history.items() if repo == args.repo}
    try:
        write_site(args.out, history)
    except OSError as err:
        print(f"llmgate: cannot write {args.out}: {err.strerror or err}", file=sys.stderr)
        return 2
    runs = sum(len(r) for r in history.values())
    print(f"wrote {args.out / 'index.html'}: {len(history)} repositories, {runs} runs "
          f"from {len(records)} stored records")
    return 0
