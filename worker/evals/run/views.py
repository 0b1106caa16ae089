"""What a run hides from its targets, and the views of the checkout its targets run in.

The eval data that grades a target must not be readable by it (issue 30): a command target
(and an agent's tool command) runs in a view of its checkout (worker/security/target_view.py)
without ``.git`` and without every file the run's evaluation contracts name (`hidden_paths`):
the config files (their judge rubrics and assertion values are inline), the datasets, trap
files, judge labels and their snapshots, ``json_schema`` files and ``python`` assertion and
metric files, including those an example names in its own ``assert`` list. A head run scores
head's target on base's contract (worker/evals/verdict/contract.py), so its configs name base's
files, under the same paths in head's checkout, and head's own where head changes them.
The prompt file and a command's own files are the target's: they stay.

A run builds one view per checkout it runs commands in, on the first command, and removes it
when the run ends (`TargetViews.close`, called by `worker.evals.run.runner.run_suites` and a
shard job; a forgotten one goes with its run state).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path

from worker.checkout import GitError, local_git
from worker.errors import ConfigError, ExecutionError
from worker.evals.config import load_suite_dataset, snapshot_path
from worker.evals.types import (
    CONFIG_FILENAME,
    AssertionSpec,
    CommandTarget,
    Config,
    ModelTarget,
    SuiteConfig,
)
from worker.security import TargetView, build_view, remove_view


def hidden_paths(configs: Sequence[Config], root: Path) -> tuple[str, ...]:
    """Return every file the evaluation contracts of ``configs`` name (module doc), sorted.

    Args:
        configs: the run's configs.
        root: the run's checkout; a suite's dataset is read at its ``contract_root``, else
            here, for the files its examples name.

    Returns:
        Paths relative to the run's root (POSIX), as the configs write them. A dataset that
        cannot be read only loses its examples' own files (the run reports the error itself).
    """
    found = {CONFIG_FILENAME}
    for config in configs:
        found.add(config.path)
        for suite in config.suites:
            found.update(_suite_files(suite, suite.contract_root or root))
    return tuple(sorted(found))


def _suite_files(suite: SuiteConfig, contract: Path) -> set[str]:
    files = {suite.dataset, *(m.function.rsplit(":", 1)[0] for m in suite.metrics
                             if m.function)}
    if suite.traps:
        files.add(suite.traps)
    if suite.judge is not None:
        files |= {suite.judge.labels, snapshot_path(suite.judge.labels)}
    specs: list[AssertionSpec] = list(suite.assertions)
    if suite.consistency is None:  # a consistency suite's questions name no files
        try:
            examples = load_suite_dataset(contract, suite)
        except ConfigError:
            examples = ()
        specs += [s for e in examples for s in (*e.assertions,
                                                 *(a for t in e.turns for a in t.assertions))]
    return files | set(assertion_files(specs))


def assertion_files(specs: Iterable[AssertionSpec]) -> list[str]:
    """Return the repository files ``specs`` read: ``json_schema`` ``file``s and ``python``
    ``function`` files (``path.py:fn`` -> ``path.py``)."""
    files = []
    for spec in specs:
        if spec.type == "json_schema" and isinstance(spec.params.get("file"), str):
            files.append(spec.params["file"])
        elif spec.type == "python" and isinstance(spec.params.get("function"), str):
            files.append(spec.params["function"].rsplit(":", 1)[0])
    return files


class TargetViews:
    """The views of one run's checkouts (module doc)."""

    def __init__(self, hidden: Sequence[str] = ()) -> None:
        """Hide ``hidden`` (a shard's, given with its work) until `of_configs` says more."""
        self._hidden: tuple[str, ...] | None = tuple(hidden)
        self._configs: tuple[tuple[Config, ...], Path] | None = None
        self._built: dict[Path, TargetView] = {}
        self._lock = asyncio.Lock()
        weakref.finalize(self, _remove_all, self._built)

    def of_configs(self, configs: Sequence[Config], root: Path) -> None:
        """Hide what the evaluation contracts of ``configs`` (run at ``root``) name: read
        when a command first runs (a run of model targets reads nothing more)."""
        self._configs, self._hidden = (tuple(configs), root), None

    def hidden(self) -> tuple[str, ...]:
        """Return the paths the views leave out (`hidden_paths`), relative to the run's root."""
        if self._hidden is None:
            self._hidden = hidden_paths(*self._configs) if self._configs is not None else ()
        return self._hidden

    async def cwd(self, root: Path, working_tree: bool) -> Path:
        """Return the directory a command of the checkout ``root`` runs in: its view, built
        on first use.

        Args:
            root: the checkout, or a config folder inside it.
            working_tree: ``root`` is the user's working tree (``llmgate run`` without
                ``--head``): what git ignores there is linked, not copied.

        Raises:
            ExecutionError: the view cannot be built (no space left, an unreadable file).
        """
        async with self._lock:
            if root not in self._built:
                linked = await _ignored(root) if working_tree else []
                try:
                    self._built[root] = await _build(root, self.hidden(), linked)
                except OSError as err:
                    raise ExecutionError(f"cannot copy the checkout for its targets (without "
                                         f"the eval data they may not read): {err}") from None
            return self._built[root].root

    def close(self) -> None:
        """Remove every view built so far (a later `cwd` builds afresh); never raises."""
        _remove_all(self._built)


async def _build(root: Path, hidden: Sequence[str], linked: Sequence[str]) -> TargetView:
    """`build_view` in a thread (the copy takes about as long as the checkout); a run
    cancelled meanwhile removes the view once it is built."""
    task = asyncio.ensure_future(asyncio.to_thread(build_view, root, hidden, linked))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.add_done_callback(_remove_built)
        raise


def _remove_built(task: asyncio.Future[TargetView]) -> None:
    if not task.cancelled() and task.exception() is None:
        remove_view(task.result())


def _remove_all(built: dict[Path, TargetView]) -> None:
    for view in built.values():
        remove_view(view)
    built.clear()


async def _ignored(root: Path) -> list[str]:
    """The entries of the working tree at ``root`` that git ignores, relative to it (a folder
    once, not its contents); [] outside a git repository."""
    try:
        code, out, _ = await local_git(root, "ls-files", "--others", "--ignored",
                                       "--exclude-standard", "--directory", "-z")
    except GitError:
        return []
    return [entry for entry in out.split("\0") if entry] if code == 0 else []


def runs_commands(target: CommandTarget | ModelTarget) -> bool:
    """Return whether ``target`` starts processes: a command, or an agent with a command tool."""
    return isinstance(target, CommandTarget) or any(tool.command for tool in target.tools)
