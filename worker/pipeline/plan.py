"""Several configs in one repository: which ones a pull request gates (a `Plan`).

A repository may hold more configs than the root ``.llmgate.yml``:

- the root config lists them (``configs: [services/a, services/b/.llmgate.yml]``; it may
  then have no ``suites``), or
- the root config says ``discover: true``, or there is no root config: every
  ``.llmgate.yml`` in the repository's folders is gated (hidden folders and ``node_modules``,
  ``vendor``, ``third_party`` are skipped; at most `MAX_CONFIGS`).

Both commits are read and their configs united, base's first: a pull request cannot drop a
config from its own gate (a config that exists at base but not at head fails the gate:
`worker.pipeline.multi`), and a config new at head is gated with the absolute rules only (it has
no base). A ``configs:`` entry of the head that names no regular file of the head's tree is a
configuration error on the entry's line. ``settings.checks`` (``combined`` or ``per_config``)
comes from the base's root config, else the head's. A repository that holds no config at either
commit (`nothing_to_gate`) is not gated at all: its check is ``neutral`` ("no llmgate config"),
so installing the App on every repository of an organisation turns no pull request red.

A config in a folder works as if the folder were its repository (worker/pipeline/multi.py).
"""

from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass, field
from pathlib import Path

from worker.errors import ConfigError
from worker.evals.config import MAX_CONFIGS, MAX_PATH_CHARS
from worker.evals.types import CONFIG_FILENAME, Config, Settings
from worker.evals.verdict import contract_components
from worker.pipeline.config_file import base_mode, read_config
from worker.pipeline.report_values import CheckMode

#: Folders discovery never enters (besides hidden ones): vendored code carries its own configs.
SKIPPED_DIRS = frozenset({"node_modules", "vendor", "third_party"})


@dataclass(frozen=True)
class Side:
    """What one commit's tree says about its configs.

    Attributes:
        root: the root config, or None (absent or invalid).
        error: why the root config is invalid (its file and line), or None.
        paths: the other configs' paths (repository-relative POSIX), listed order then
            discovered (sorted).
        listed: listed path -> its line in the root config's ``configs:``.
        notes: what discovery left out and why.
    """

    root: Config | None = None
    error: ConfigError | None = None
    paths: tuple[str, ...] = ()
    listed: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConfigPlan:
    """One config to gate.

    Attributes:
        path: its file, repository-relative (``.llmgate.yml`` for the root config).
        folder: its folder ("" for the root config): the root of its suites' files.
        at_head, at_base: whether the file is a regular file of that commit's tree.
        error: a configuration error found while planning (reported instead of a run).
    """

    path: str
    folder: str
    at_head: bool = True
    at_base: bool = True
    error: ConfigError | None = None


@dataclass(frozen=True)
class Plan:
    """The configs a pull request gates and how they report.

    Attributes:
        configs: root config first (when gated), then base's configs, then those new at head.
        checks: ``combined`` (one ``llmgate`` check run) or ``per_config``.
        notes: lines for the report (a base list that could not be read, skipped files).
    """

    configs: tuple[ConfigPlan, ...]
    checks: CheckMode = "combined"
    notes: tuple[str, ...] = ()

    @property
    def several(self) -> bool:
        """Whether this is more than today's single root config."""
        return any(c.folder for c in self.configs)


def read_side(root: Path) -> Side:
    """Return what the checkout at ``root`` says about its configs (reads its files)."""
    try:
        config = read_config(root)
    except ConfigError as err:
        return Side(error=err)
    listed = {r.path: r.line for r in config.configs} if config is not None else {}
    if config is not None and not config.discover:
        return Side(config, paths=tuple(listed), listed=listed)
    try:
        found, notes = discover(root)
    except ConfigError as err:
        return Side(config, err if config is None else ConfigError(
            err.path, config.layout_line, err.message))
    return Side(config, None, tuple(dict.fromkeys([*listed, *found])), listed, notes)


def unconfigured(side: Side) -> bool:
    """Whether a commit's tree holds no llmgate config at all: no root ``.llmgate.yml`` (not
    even a broken one) and none in its folders that `discover` would gate."""
    return side.root is None and side.error is None and not side.paths


def nothing_to_gate(head_root: Path, base_root: Path | None) -> bool:
    """Whether neither commit holds an llmgate config (`unconfigured` at base and at head).

    Without a base (``base_root`` None) the answer is False: only the base can show that the
    head did not delete a config, so a head without one is still a configuration error.
    """
    return base_root is not None and unconfigured_tree(base_root) and \
        unconfigured_tree(head_root)


def unconfigured_tree(root: Path) -> bool:
    """Whether the checkout at ``root`` holds no llmgate config (`unconfigured`)."""
    return unconfigured(read_side(root))


def discover(root: Path) -> tuple[list[str], tuple[str, ...]]:
    """Return every ``.llmgate.yml`` in ``root``'s folders (sorted) and notes of skipped ones.

    Hidden folders, `SKIPPED_DIRS` and symlinked folders are not entered; a config that is a
    symlink or whose path has control characters is skipped with a note.

    Raises:
        ConfigError: more than `MAX_CONFIGS` configs (on the root config, no line).
    """
    found, notes = [], []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
        if CONFIG_FILENAME not in files or Path(folder) == root:
            continue
        rel = Path(folder, CONFIG_FILENAME).relative_to(root).as_posix()
        if not is_regular_file(root, rel) or len(rel) > MAX_PATH_CHARS or \
                any(ord(c) < 32 or c in "\x7f\\" for c in rel):
            notes.append(f"{rel!r} is not gated: a config must be a regular file with a plain "
                         f"path of at most {MAX_PATH_CHARS} characters")
            continue
        found.append(rel)
    if len(found) > MAX_CONFIGS:
        raise ConfigError(CONFIG_FILENAME, None, f"{len(found)} {CONFIG_FILENAME} files found "
                          f"in folders; llmgate gates at most {MAX_CONFIGS} per repository: list "
                          "the ones to gate under `configs:` in the root .llmgate.yml")
    return sorted(found), tuple(notes)


def is_regular_file(root: Path, rel: str) -> bool:
    """Whether ``rel`` is a regular file in ``root`` reached without any symlink."""
    real_root = root.resolve()
    path = real_root / rel
    try:
        return path.parent.resolve() == path.parent and stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def folder_root(root: Path, folder: str) -> Path | None:
    """Return ``root/folder`` when no symlink is on the way (it may not exist), else None."""
    real_root = root.resolve()
    path = real_root / folder
    return path if path.resolve() == path else None


def baseline_namespace(repo: str, folder: str) -> str:
    """Return the name a config's stored baselines are kept under (worker/baselines/store.py).

    The root config's are the repository's ``owner/name`` as with a single config; a folder's
    are ``owner/name/<folder>``, so two folders' suites never share a baseline, whatever their
    names and files.
    """
    return f"{repo}/{folder}" if folder else repo


def plan_configs(head_root: Path, base_root: Path | None) -> Plan:
    """Decide which configs a pull request gates (see the module docstring).

    ``base_root`` None (``llmgate run`` without ``--base``) reads the head only.
    """
    head = read_side(head_root)
    base = read_side(base_root) if base_root is not None else Side()
    notes = [*base.notes, *(n for n in head.notes if n not in base.notes)]
    paths = dict.fromkeys([*base.paths, *head.paths])
    if base.error is not None and paths:
        notes.append(f"the base commit's configs are not known ({base.error}): the head's "
                     "configs are gated")
    configs, root_errors = [], [head.error] if head.error is not None else []
    for path in paths:
        at_head = is_regular_file(head_root, path)
        at_base = base_root is not None and is_regular_file(base_root, path)
        if not at_head and path in head.listed:
            root_errors.append(ConfigError(CONFIG_FILENAME, head.listed[path], f"`configs`: "
                                           f"{path} is not a regular file of this commit"))
        if not at_head and not at_base:
            if path not in head.listed:
                notes.append(f"{path} is listed at base but exists at neither commit: "
                             "nothing to gate")
            continue
        configs.append(ConfigPlan(path, posixpath.dirname(path), at_head, at_base))
    if root_errors or not configs or _has_suites(head.root) or _has_suites(base.root):
        configs.insert(0, ConfigPlan(CONFIG_FILENAME, "", error=next(iter(root_errors), None)))
    return Plan(tuple(configs), _checks(base.root or head.root), tuple(notes))


def folder_plan(path: str, head_root: Path, base_root: Path | None) -> Plan | None:
    """Return the plan of the one config ``path`` (``llmgate run --config``) when it is a
    ``.llmgate.yml`` in a folder, so it runs in its folder as the worker runs it; else None."""
    normal = posixpath.normpath(path)
    folder = posixpath.dirname(normal)
    if posixpath.basename(normal) != CONFIG_FILENAME or not folder or normal.startswith("../") \
            or posixpath.isabs(normal):
        return None
    at_head = is_regular_file(head_root, normal)
    at_base = base_root is not None and is_regular_file(base_root, normal)
    error = None if at_head or at_base else ConfigError(
        normal, None, f"no {normal} at head: add one to gate")
    return Plan((ConfigPlan(normal, folder, at_head, at_base, error),))


def _has_suites(config: Config | None) -> bool:
    return config is not None and bool(config.suites)


def _checks(config: Config | None) -> CheckMode:
    return config.settings.checks if config is not None else Settings().checks


#: Why a head behind its base branch is compared as merged into the tip (`merged_note`).
MERGED_REASON = "with the head merged into it, as merging the pull request would"


def merged_note(tip: str, head: str, merged: str) -> str:
    """The report's note for a head gated as merged into the base branch's tip.

    A head that branched from an older commit of its base branch is gated as it would land:
    ``merged`` (``head`` merged into ``tip``) against ``tip`` itself. Compared only with its fork
    point, a pull request that breaks what the branch fixed after it forked would pass (issue 30:
    the examples it breaks already failed at the merge base). All SHAs are full hex ids.
    """
    return (f"the head {head[:7]} is behind the base branch: gated as merging it would land, "
            f"{merged[:7]} ({head[:7]} merged into the tip {tip[:7]}), against the tip; "
            "annotations point at the merged files")


#: The headline of a conflicting head that the rules would pass (`conflict_note`).
CONFLICT_UNDECIDED = ("the head conflicts with the base branch, so what merging it would land "
                      "cannot be gated; resolve the conflict (the new head is gated anew)")


def conflict_note(tip: str) -> str:
    """The report's note for a head that conflicts with the base branch's tip ``tip`` (a full
    SHA): the head itself is compared, with the merge base (or the tip, as `tip_reason` says).

    Such a head cannot be merged as it is (GitHub refuses), and resolving the conflict pushes a
    new head, which is gated anew. Its comparison can fail it but never pass it: a passing
    verdict would stay on the pull request when a later push to the base branch removes the
    conflict, for a merge nobody gated (fresh user, issue 30), so such a run is undecided
    (`CONFLICT_UNDECIDED`, `worker.pipeline.report_values.MultiReport.undecided_unless_failed`).
    """
    return (f"the head conflicts with the base branch's tip {tip[:7]}, so the merge result "
            "cannot be gated and the head itself is compared. The pull request cannot merge "
            "until the conflict is resolved, and resolving it pushes a new head, which is gated "
            "anew")


def tip_reason(merge_root: Path, tip_root: Path) -> str | None:
    """Why a pull request is compared with its base branch's tip, not the merge base, or None.

    The gate's rules, settings and evaluation contract are the base branch's as it is now:
    a pull request chooses its fork point, so one branched from an old commit (before
    llmgate was adopted, before a rule was tightened or an example added) must not be gated
    by that commit's config. When the tip says ``settings.base: tip``, or its configs (which
    exist, their rules, settings and contracts: `gate_view`) differ from the merge base's,
    the tip is the base compared; otherwise the merge base is (what "Files changed" shows).

    Args:
        merge_root, tip_root: checkouts of the merge base and of the base branch's tip.

    Returns:
        The reason, for the report's note, or None (compare with the merge base).
    """
    if base_mode(tip_root) == "tip":
        return "as settings.base: tip says"
    if gate_view(tip_root) != gate_view(merge_root):
        return ("the base branch's llmgate configs (their rules, settings or evaluation "
                "contract) changed after this branch forked from it, and the gate follows "
                "the base branch as it is now")
    return None


def gate_view(root: Path) -> list[object]:
    """Everything the gate reads from a commit's configs, for comparison: each config's
    path, its settings, and each suite's name, rules and contract digests (reads files;
    never raises: an invalid config is its error message)."""
    side = read_side(root)
    view: list[object] = [None if side.error is None else side.error.message, side.paths]
    for path in (CONFIG_FILENAME, *side.paths):
        folder = posixpath.dirname(path)
        base = folder_root(root, folder) if folder else root
        try:
            config = read_config(base) if base is not None else None
        except ConfigError as err:
            view.append((path, err.message))
            continue
        if config is None or base is None:
            view.append((path, None))
            continue
        view.append((path, config.settings, [
            (s.name, s.gate, s.gate_options, contract_components(s, config.settings, base))
            for s in config.suites]))
    return view
