"""Stored baselines without the App: ``llmgate run --baseline-store`` and ``llmgate baseline push``.

``llmgate run --base B --baseline-store STORE`` reuses, for every suite, a stored result of
exactly the base commit with an equal key (worker/baselines/reuse.py, as the App does) and runs
and stores the others, so a pull request's CI run whose base commit did not change makes no
base calls. ``llmgate baseline push`` runs the suites of every config of a commit of the
default branch (HEAD by default; the root config and its folders', as ``llmgate run`` finds
them), stores each config's under its folder's namespace (so ``runner_for`` finds them for
every folder), and with a ``git`` store makes one commit of the push and pushes the ref to a
remote. The stores are
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

from worker.cli.repository import repo_root
from worker.errors import ConfigError, ExecutionError

if TYPE_CHECKING:
    from worker.baselines import ConfigPush
    from worker.pipeline import BaseRunner

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
    from worker.baselines import Origin, StoredBaselines, open_store
    from worker.pipeline import baseline_namespace

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
        description="Run the suites of every config at --ref (default HEAD), the root's and "
                    "its folders' as `llmgate run` finds them, and store them in "
                    "--baseline-store (default git: one commit on the ref "
                    "refs/llmgate/baselines); with a git store, push that ref to --remote "
                    "unless --no-push. Exit 0 stored, 2 configuration error (the other configs "
                    "are still stored), 3 execution error.")
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
    """Run and store the suites of every config at ``--ref``; push a git store's ref.

    The configs are those ``llmgate run`` gates at that commit (the root config, the folders
    its ``configs:`` lists or discovery finds: worker/baselines/plan_push.py), each stored
    under its folder's namespace; a git store gets one commit for the whole push (none when
    every suite was already stored). Prints a line per config (its stored suites, or why
    not) and a summary; errors go to stderr with the file and line.

    Exit codes: 0 every config stored (a line names any suite not stored: stopped early,
    unscored examples), 2 configuration error (no suite at all, or a config's own: the other
    configs are still stored and pushed), 3 execution error (git, the store, the push or a
    config's run failed).
    """
    import asyncio  # not at import time: `llmgate --help` builds this command's parser

    from worker.checkout import GitError, local_git

    repo = repo_root(Path.cwd())
    try:
        sha, pushed, ref = asyncio.run(_push(args, repo))
    except ConfigError as err:
        print(f"llmgate: configuration error: {err}", file=sys.stderr)
        return 2
    except (GitError, ExecutionError, OSError) as err:
        print(f"llmgate: {err}", file=sys.stderr)
        return 3
    code = _say_pushed(sha, pushed)
    if ref is None or args.no_push:
        return code
    if not any(p.stored for p in pushed):
        print(f"llmgate: nothing stored: {ref} not pushed", file=sys.stderr)
        return code
    done, _, why = asyncio.run(local_git(repo, "push", "-q", "--", args.remote,
                                         f"{ref}:{ref}"))
    if done != 0:
        print(f"llmgate: git push {args.remote} {ref} failed: {why.strip()}", file=sys.stderr)
        return 3
    print(f"llmgate: pushed {ref} to {args.remote}")
    return code


async def _push(args: argparse.Namespace, repo: Path) -> tuple[str, tuple[ConfigPush, ...],
                                                              str | None]:
    """Store every config at ``args.ref``; return its SHA, what each config did and a git
    store's ref (None for another store).

    Raises:
        ConfigError: no config at the commit has a suite.
        ExecutionError: the store cannot be opened, or a git store's commit failed (nothing
            of this push is then stored in it).
        GitError: the commit or a checkout cannot be had.
    """
    from contextlib import AsyncExitStack

    from worker.baselines import GitRefStore, Origin, open_store, push_plan
    from worker.checkout import local_worktree, resolve_ref
    from worker.evals.llm import eval_context

    sha = await resolve_ref(repo, args.ref)
    branch = args.branch or await _current_branch(repo)
    store, redis = open_store(args.baseline_store, repo, os.environ)
    batch = store if isinstance(store, GitRefStore) else None
    async with AsyncExitStack() as stack:
        if redis is not None:
            stack.push_async_callback(redis.aclose)
        root = await stack.enter_async_context(local_worktree(repo, sha))
        evals = await stack.enter_async_context(eval_context(args, repo))
        if batch is not None:
            batch.start_batch()  # one commit for the whole push
        pushed = await push_plan(store, repository_name(), root, sha,
                                 Origin("push", branch=branch), evals)
    if batch is None:
        return sha, pushed, None
    count = len(batch.held)
    why = await batch.commit_batch(f"llmgate baseline push of {sha[:12]} ({branch}): "
                                   f"{count} suite{'s' if count != 1 else ''}")
    if why is not None:
        raise ExecutionError(f"nothing stored in {batch.ref}: {why}")
    return sha, pushed, batch.ref


def _say_pushed(sha: str, pushed: tuple[ConfigPush, ...]) -> int:
    """Print a line per config and a summary; return the exit code (see `cmd_baseline_push`)."""
    for config in pushed:
        if isinstance(config.error, ConfigError):
            print(f"llmgate: configuration error: {config.error}", file=sys.stderr)
        elif config.error is not None:
            print(f"llmgate: {config.path}: {config.error}", file=sys.stderr)
        print(f"llmgate: {config.path}: {_said(config)}")
    failed = [c.path for c in pushed if c.error is not None]
    suites = sum(len(c.stored) for c in pushed)
    print(f"llmgate: {sha[:7]}: {suites} suite{'s' if suites != 1 else ''} of "
          f"{len(pushed) - len(failed)} of {len(pushed)} configs stored"
          + (f"; not stored: {', '.join(failed)}" if failed else ""))
    if any(isinstance(c.error, ExecutionError) for c in pushed):
        return 3
    return 2 if failed else 0


def _said(config: ConfigPush) -> str:
    """One config's part of the push, e.g. ``stored a, b; not stored: c: the run stopped
    early (budget)``."""
    if config.error is not None:
        kind = "configuration" if isinstance(config.error, ConfigError) else "execution"
        return f"not stored ({kind} error)"
    parts = [f"stored {', '.join(config.stored)}"] if config.stored else []
    parts += [f"not stored: {'; '.join(config.not_stored)}"] if config.not_stored else []
    return "; ".join(parts) or "no suites"


async def _current_branch(repo: Path) -> str:
    from worker.checkout import local_git

    code, out, _ = await local_git(repo, "symbolic-ref", "-q", "--short", "HEAD")
    return out.strip() if code == 0 and out.strip() else "HEAD"
