"""Stored baselines without the App: ``llmgate run --baseline-store`` and ``llmgate baseline push``.

``llmgate run --base B --baseline-store STORE`` reuses, for every suite, a stored result of
exactly the base commit with an equal key (worker/baselines/reuse.py, as the App does) and runs
and stores the others, so a pull request's CI run whose base commit did not change makes no
base calls. ``llmgate baseline push`` runs the suites of a commit of the default branch (HEAD
by default), stores them, and with a ``git`` store pushes the ref to a remote. The stores are
worker/baselines/local.py's: a directory, ``redis`` (``REDIS_URL``) or ``git[:refs/llmgate/..]``.
Records are kept under ``GITHUB_REPOSITORY`` when set (the App's name for the repository, so a
Redis shared with the App serves both), else ``local``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from worker.errors import ConfigError, ExecutionError

if TYPE_CHECKING:
    from worker.pipeline.trees import BaseRunner

STORE_HELP = ("reuse and keep base results here: a directory (a CI cache or artifact), "
              "'redis' (REDIS_URL) or 'git' / 'git:refs/llmgate/NAME' (a ref of this "
              "repository, pushed by `llmgate baseline push`)")


def add_store_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--baseline-store STORE`` to a command."""
    parser.add_argument("--baseline-store", metavar="STORE", default=None, help=STORE_HELP)


def repository_name() -> str:
    """The name records are kept under: ``GITHUB_REPOSITORY`` (``owner/name``) or ``local``."""
    return os.environ.get("GITHUB_REPOSITORY") or "local"


@asynccontextmanager
async def runner_for(args: argparse.Namespace, repo: Path) -> AsyncIterator[
        Callable[[str], BaseRunner] | None]:
    """Yield folder -> base runner for ``llmgate run`` (None without ``--baseline-store``),
    closing the store's Redis client afterwards.

    Raises:
        ExecutionError: the store cannot be opened (worker/baselines/local.py `open_store`).
    """
    spec = getattr(args, "baseline_store", None)
    if not spec:
        yield None
        return
    from worker.baselines.local import open_store
    from worker.baselines.reuse import Origin, StoredBaselines
    from worker.pipeline.plan import baseline_namespace

    store, redis = open_store(spec, repo, os.environ)
    origin = Origin("pull_request", role="the base")
    try:
        yield lambda folder: StoredBaselines(store, baseline_namespace(repository_name(), folder),
                                             origin)
    finally:
        if redis is not None:
            await redis.aclose()


def add_baseline_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``llmgate baseline push``."""
    baseline = sub.add_parser("baseline", help="stored base results without the App",
                              description="Keep base results for `llmgate run "
                                          "--baseline-store`.")
    actions = baseline.add_subparsers(metavar="ACTION")
    push = actions.add_parser(
        "push", help="run and store the suites of a commit (run it on the default branch)",
        description="Run the root config's suites at --ref (default HEAD) and store them in "
                    "--baseline-store (default git: the ref refs/llmgate/baselines); with a git "
                    "store, push that ref to --remote unless --no-push. Exit 0 stored, 2 "
                    "configuration error, 3 execution error.")
    push.add_argument("--ref", default="HEAD", help="the commit to store (default HEAD)")
    push.add_argument("--baseline-store", metavar="STORE", default="git", help=STORE_HELP)
    push.add_argument("--branch", default=None,
                      help="the branch named in the records (default: the current branch)")
    push.add_argument("--remote", default="origin", help="where a git store's ref is pushed")
    push.add_argument("--no-push", action="store_true", help="store only, push nothing")
    push.set_defaults(func=cmd_baseline_push)
    baseline.set_defaults(func=lambda args: _help(baseline))


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def cmd_baseline_push(args: argparse.Namespace) -> int:
    """Run and store the root config's suites at ``--ref``; push a git store's ref.

    Exit codes: 0 stored (every suite, or the line names those not stored), 2 configuration
    error, 3 execution error (git, the store or the run failed).
    """
    import asyncio  # not at import time: `llmgate --help` builds this command's parser

    from worker.checkout import GitError, local_git
    from worker.cli.main import repo_root

    repo = repo_root(Path.cwd())
    try:
        line = asyncio.run(_push(args, repo))
    except ConfigError as err:
        print(f"llmgate: configuration error: {err}", file=sys.stderr)
        return 2
    except (GitError, ExecutionError, OSError) as err:
        print(f"llmgate: {err}", file=sys.stderr)
        return 3
    print(f"llmgate: {line}")
    spec = args.baseline_store
    if args.no_push or not (spec == "git" or spec.startswith("git:")):
        return 0
    ref = spec[4:] if spec.startswith("git:") else "refs/llmgate/baselines"
    code, _, why = asyncio.run(local_git(repo, "push", "-q", "--", args.remote,
                                         f"{ref}:{ref}"))
    if code != 0:
        print(f"llmgate: git push {args.remote} {ref} failed: {why.strip()}", file=sys.stderr)
        return 3
    print(f"llmgate: pushed {ref} to {args.remote}")
    return 0


async def _push(args: argparse.Namespace, repo: Path) -> str:
    from contextlib import AsyncExitStack

    from worker.baselines.local import open_store
    from worker.baselines.reuse import Origin, StoredBaselines
    from worker.checkout import local_worktree, resolve_ref
    from worker.evals.llm.cli_cache import eval_context
    from worker.pipeline.trees import read_config

    sha = await resolve_ref(repo, args.ref)
    branch = args.branch or await _current_branch(repo)
    store, redis = open_store(args.baseline_store, repo, os.environ)
    async with AsyncExitStack() as stack:
        if redis is not None:
            stack.push_async_callback(redis.aclose)
        root = await stack.enter_async_context(local_worktree(repo, sha))
        config = read_config(root)
        if config is None or not config.suites:
            raise ConfigError(".llmgate.yml", None, f"no suites at {sha[:7]}: nothing to store")
        evals = await stack.enter_async_context(eval_context(args))
        runner = StoredBaselines(store, repository_name(), Origin("push", branch=branch))
        base = await runner(config, root, sha, evals)
    return base.source or f"stored {sha[:7]}"


async def _current_branch(repo: Path) -> str:
    from worker.checkout import local_git

    code, out, _ = await local_git(repo, "symbolic-ref", "-q", "--short", "HEAD")
    return out.strip() if code == 0 and out.strip() else "HEAD"
