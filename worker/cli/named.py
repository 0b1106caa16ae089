"""``llmgate run --promote NAME`` and ``--compare-to NAME``: named baselines on the command line.

``--promote NAME`` checks out the head commit (``--head``, else the working tree's ``HEAD``
commit; uncommitted changes are never stored), which must be on the default branch
(`worker.checkout.local_default_branch`), runs its suites as the App's push job does (suites
already stored for that commit are reused) and points NAME at them
(worker/baselines/names.py). ``--compare-to NAME`` gates head against the commit NAME points
at, itself (never a merge base), reusing its stored suites. Both need the baseline store:
``REDIS_URL`` naming the Redis of the App (or a local one). The repository is named by its
``origin`` remote (``owner/name``, as the App stores it), else ``local/<folder name>``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

from redis.asyncio import Redis

from worker.baselines import (
    BaselineKey,
    BaselineSettings,
    BaselineStore,
    Origin,
    StoredBaselines,
    lookup,
    promote,
)
from worker.checkout import (
    local_default_branch,
    local_is_ancestor,
    local_origin,
    local_worktree,
    resolve_ref,
)
from worker.errors import ConfigError, ExecutionError
from worker.evals.context import EvalContext
from worker.pipeline import BaseRunner, baseline_namespace, folder_root, plan_configs, read_config


def open_store() -> tuple[Redis, BaselineStore]:
    """Return a Redis client of ``REDIS_URL`` and the baseline store on it (the caller closes
    the client)."""
    redis = Redis.from_url(os.environ["REDIS_URL"])
    return redis, BaselineStore(redis, BaselineSettings.from_env())


async def repo_name(repo: Path) -> str:
    """Return the repository's name in the store: ``owner/name`` of ``origin``, else
    ``local/<folder name>``."""
    return await local_origin(repo) or f"local/{repo.resolve().name}"


async def run_promote(args: argparse.Namespace, repo: Path, evals: EvalContext) -> str:
    """Run and store the head commit's suites and point ``args.promote`` at them.

    Returns:
        One line saying what was promoted.

    Raises:
        ExecutionError: the head is not on the default branch, or nothing could be stored.
        ConfigError: the head commit's config is invalid (nothing is stored).
        GitError: git failed.
    """
    sha = await resolve_ref(repo, args.head or "HEAD")
    branch = await local_default_branch(repo)
    if branch is None or not await local_is_ancestor(repo, sha, branch):
        where = f"the default branch {branch}" if branch else "a default branch (none found)"
        raise ExecutionError(f"--promote stores only commits on {where}: {sha[:7]} is not on "
                             "it (merge first, or name its commit with --head)")
    name, key = args.promote, await repo_name(repo)
    redis, store = open_store()
    try:
        async with local_worktree(repo, sha) as root:
            stored = await _store_plan(store, key, root, sha, branch, evals)
        if not stored:
            raise ExecutionError(f"no suite of {sha[:7]} could be stored (no config, or every "
                                 "suite stopped early or had unscored examples): nothing "
                                 f"promoted as {name}")
        await promote(store, key, name, sha, branch, stored)
    finally:
        await redis.aclose()
    return f"promoted {sha[:7]} ({branch}) as the baseline {name} of {key}: {len(stored)} suites"


async def _store_plan(store: BaselineStore, repo: str, root: Path, sha: str, branch: str,
                      evals: EvalContext) -> list[tuple[str, BaselineKey]]:
    """Run (or reuse) and store the suites of every config of ``root``; return the
    ``(namespace, key)`` of each suite now stored for ``sha``."""
    plan = plan_configs(root, None)
    found: list[tuple[str, BaselineKey]] = []
    for config in plan.configs:
        folder = folder_root(root, config.folder)
        if config.error is not None or folder is None:
            raise config.error or ConfigError(config.path, None, "its folder is a symlink")
        read = read_config(folder)
        if read is None:
            continue
        namespace = baseline_namespace(repo, config.folder)
        runner = StoredBaselines(store, namespace, Origin("push", branch=branch))
        base = await runner(read, folder, sha, evals)
        kept = [n for n in base.result.suites
                if await store.get(namespace, sha, runner.keys[n]) is not None]
        found += [(namespace, runner.keys[n]) for n in kept]
    return found


async def compare_to_side(stack: AsyncExitStack, repo: Path, name: str
                          ) -> tuple[Path, str, str, Callable[[str], BaseRunner]]:
    """Check out the commit baseline ``name`` points at.

    Returns:
        ``(its worktree, its SHA, a note for the report, folder -> base runner)``; the runners
        reuse the stored suites of that commit and run (and store) the others.

    Raises:
        ExecutionError: no commit is promoted as ``name``, or it is not in this clone.
    """
    key = await repo_name(repo)
    redis, store = open_store()
    stack.push_async_callback(redis.aclose)
    pointer = await lookup(store, key, name)
    if pointer is None:
        raise ExecutionError(f"no baseline named {name} for {key}: promote one with "
                             f"`llmgate run --promote {name}` on the default branch")
    sha = str(pointer["sha"])
    try:
        await resolve_ref(repo, sha)
    except Exception:  # GitError: the commit is not here
        raise ExecutionError(f"the baseline {name} is commit {sha[:7]}, which this clone does "
                             "not have: fetch it first") from None
    root = await stack.enter_async_context(local_worktree(repo, sha))
    role = f"the baseline {name}"

    def runner_for(folder: str) -> BaseRunner:
        return StoredBaselines(store, baseline_namespace(key, folder),
                               Origin("push", branch=str(pointer.get("branch", "")), role=role))

    note = (f"the base is the baseline {name} ({sha[:7]} on {pointer.get('branch', '?')}), not "
            "a merge base")
    return root, sha, note, runner_for

