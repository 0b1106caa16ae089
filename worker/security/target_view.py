"""A copy of a checkout for its targets to run in, without the data that grades them.

A target is code from the pull request; the dataset, traps, judge labels and config that grade it
sit in the same checkout. Landlock grants by allow-list only (a file under an allowed directory
cannot be denied), so hiding a file inside the checkout needs a tree without it: the **view**.
`build_view` copies the checkout into a fresh private directory
(``$TMPDIR/llmgate-view-<pid>-<start>-<pid namespace>-*/<name>``, `worker.security.scratch`; a
killed process's are removed by the next one, before its first view or at a worker's start-up)
leaving out every ``.git`` (a worktree's ``.git`` file, a working tree's object store: ``git show
HEAD:data.jsonl`` would read the data back) and the files named hidden (with the file a hidden
symbolic link resolves to, and any hard link to a hidden file); the target's ``cwd`` is the view.
With Landlock
(`worker.security.sandbox.Sandbox.confine` asks `view_of`), the target may read and write the
view and its scratch directory only: the checkout the view was copied from, and its parent, are
not granted, and no read rule of the sandbox policy that covers them or a hidden file is added
(a ``PATH`` entry inside the repository would otherwise open it all). Without Landlock the
view still keeps the hidden files out of the target's directory, but the target could open
the original by its absolute path: the gate says so (worker/pipeline/exposure.py).

Why a copy and not hard links: a hard link shares the inode, so a target's write would change
the worker's checkout, which the worker reads again after the run (fingerprints, head's own
contract). Files are cloned where the filesystem can (``FICLONE``: btrfs, XFS), else copied;
modes and times are kept, symbolic links are copied as links, FIFOs, sockets and devices are
left out. What git ignores in a working tree (``linked``: ``.venv/``, ``node_modules/``, build
output; ``llmgate run`` on the user's working tree) is not copied: the view has a symbolic
link to the original entry and the sandbox grants that entry (it holds no hidden file: an
ignored folder that does is copied entry by entry instead). A fresh git worktree (the App,
``llmgate run --head``, every base) has nothing ignored, so it is copied whole: about the cost
of the checkout itself (``docs/security-model.md`` has the figures).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import posixpath
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from worker.checkout import remove_tree
from worker.security import scratch

#: Prefix of the private directory holding a view.
VIEW_PREFIX = scratch.VIEW_PREFIX
#: The ioctl that clones a file's extents (linux/fs.h ``FICLONE``, ``_IOW(0x94, 9, int)``).
FICLONE = 0x40049409
_GIT = ".git"
_views: dict[str, TargetView] = {}
_swept: list[int] = []  # stale scratch folders removed before this process's first view


@dataclass(frozen=True)
class TargetView:
    """A built view (see the module doc).

    Attributes:
        root: the view, the targets' working directory (absolute).
        origin: the checkout (or config folder) it was copied from.
        hidden: the hidden paths (relative POSIX, normalised) that existed in ``origin``,
            sorted: what the target does not get.
        linked: original entries the view links to instead of copying (git-ignored in a
            working tree), granted to targets by the sandbox.
        denied: real paths no read rule of the sandbox may cover: ``origin`` and each hidden
            file (`worker.security.sandbox.Sandbox.confine`).
    """

    root: Path
    origin: Path
    hidden: tuple[str, ...]
    linked: tuple[Path, ...]
    denied: tuple[Path, ...]


@dataclass
class _Plan:
    origin: Path
    hidden: set[str]
    inodes: set[tuple[int, int]]
    ignored: set[str]
    holding: set[str]  # the folders on the way to a hidden path
    linked: list[Path]
    clone: bool = True  # False once the filesystem refused FICLONE: copy the rest


def build_view(origin: Path, hidden: Iterable[str], linked: Iterable[str] = ()) -> TargetView:
    """Copy ``origin`` into a new view without ``.git`` and the ``hidden`` paths; register it.

    Args:
        origin: the checkout, or a config folder inside one (an existing directory).
        hidden: paths relative to ``origin`` (POSIX) to leave out; paths that do not exist,
            or lead outside ``origin``, are ignored.
        linked: paths relative to ``origin`` that git ignores (a working tree), linked rather
            than copied unless they hold a hidden path.

    Returns:
        The view; remove it with `remove_view`.

    Raises:
        OSError: the copy failed (no space left, a file that cannot be read); nothing is left
            behind.
    """
    if not _swept:  # dead processes' views and target folders (``llmgate run`` killed too)
        _swept.append(len(scratch.remove_stale()))
    plan = _plan(origin.absolute(), hidden, linked)
    parent = scratch.make(VIEW_PREFIX)  # mode 0700, named after this process
    root = parent / (origin.name or "checkout")
    try:
        root.mkdir()
        _copy_dir(plan, plan.origin, root, "", ignored=False)
        shutil.copystat(plan.origin, root)
    except BaseException:
        remove_tree(parent)
        raise
    real = plan.origin.resolve()
    denied = [real, *(Path(os.path.realpath(real / rel)) for rel in sorted(plan.hidden))]
    view = TargetView(root, plan.origin, tuple(sorted(plan.hidden)), tuple(plan.linked),
                      tuple(dict.fromkeys(denied)))
    _views[os.path.realpath(root)] = view
    return view


def remove_view(view: TargetView) -> None:
    """Forget ``view`` and delete it (whatever a target left in it); never raises."""
    _views.pop(os.path.realpath(view.root), None)
    remove_tree(view.root.parent)


def remove_stale_views() -> int:
    """Remove the views a process that is gone left in the temporary directory (a worker or
    ``llmgate run`` killed mid-run; each view's folder is named after its process:
    `worker.security.scratch.remove_stale`); return how many. Never raises. (Before its first
    view a process removes dead processes' target folders too.)"""
    return len(scratch.remove_stale((VIEW_PREFIX,)))


def view_of(cwd: Path) -> TargetView | None:
    """Return the view a command about to run in ``cwd`` runs in, or None (not a view)."""
    return _views.get(os.path.realpath(cwd))


def _plan(origin: Path, hidden: Iterable[str], linked: Iterable[str]) -> _Plan:
    """What to leave out: each hidden path that exists, the path a hidden symbolic link
    resolves to inside ``origin``, and the inodes of the hidden files (their hard links)."""
    real = origin.resolve()
    found: set[str] = set()
    inodes: set[tuple[int, int]] = set()
    for rel in hidden:
        clean = posixpath.normpath(rel)
        if clean.startswith(("/", "../")) or clean in (".", ".."):
            continue
        path = origin / clean
        if not os.path.lexists(path):
            continue
        found.add(clean)
        resolved = Path(os.path.realpath(path))
        if resolved.is_relative_to(real) and resolved != real:
            found.add(resolved.relative_to(real).as_posix())
        with contextlib.suppress(OSError):
            info = resolved.stat()
            if stat.S_ISREG(info.st_mode):
                inodes.add((info.st_dev, info.st_ino))
    holding = {posixpath.dirname(rel) for rel in found}
    for rel in list(holding):
        while rel:
            rel = posixpath.dirname(rel)
            holding.add(rel)
    ignored = {posixpath.normpath(rel.rstrip("/")) for rel in linked if rel.strip("/")}
    return _Plan(origin, found, inodes, ignored, holding, [])


def _copy_dir(plan: _Plan, src: Path, dst: Path, rel: str, *, ignored: bool) -> None:
    """Copy the entries of ``src`` (``rel`` in the checkout) into the existing ``dst``."""
    with os.scandir(src) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            path = f"{rel}/{entry.name}" if rel else entry.name
            if entry.name == _GIT or path in plan.hidden:
                continue
            _copy_entry(plan, entry, dst / entry.name, path,
                        ignored=ignored or path in plan.ignored)


def _copy_entry(plan: _Plan, entry: os.DirEntry[str], dst: Path, rel: str, *,
                ignored: bool) -> None:
    if entry.is_symlink():
        os.symlink(os.readlink(entry.path), dst)
    elif ignored and rel not in plan.holding:
        os.symlink(entry.path, dst)  # git ignores it and it holds no hidden file
        plan.linked.append(Path(entry.path))
    elif entry.is_dir(follow_symlinks=False):
        dst.mkdir()
        _copy_dir(plan, Path(entry.path), dst, rel, ignored=ignored)
        shutil.copystat(entry.path, dst, follow_symlinks=False)
    elif entry.is_file(follow_symlinks=False):
        info = entry.stat(follow_symlinks=False)
        if (info.st_dev, info.st_ino) not in plan.inodes:  # a hard link to a hidden file
            plan.clone = _copy_file(entry.path, dst, clone=plan.clone)
    # FIFOs, sockets and devices are left out


def _copy_file(src: str, dst: Path, *, clone: bool) -> bool:
    """Clone ``src`` to ``dst`` (when ``clone``) where the filesystem can, else copy it; keep
    mode and times. Return whether cloning is worth trying for the next file."""
    if clone:
        with open(src, "rb") as source, open(dst, "xb") as copy:
            try:
                fcntl.ioctl(copy.fileno(), FICLONE, source.fileno())
            except OSError:  # not btrfs/XFS, or another filesystem than the checkout's
                clone = False
        if clone:
            shutil.copystat(src, dst, follow_symlinks=False)
            return True
    shutil.copyfile(src, dst)  # sendfile(2) on Linux
    shutil.copystat(src, dst, follow_symlinks=False)
    return False
