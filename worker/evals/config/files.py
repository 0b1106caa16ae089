"""Read files a config refers to (datasets, prompts, configs) without leaving the repository.

Pull requests control these paths and the files behind them: an absolute path, ``..`` or a
symlink could point at the worker's keys or another checkout, and a FIFO or a huge file could
hang or exhaust the worker. Every path is resolved and checked, then opened without following a
final symlink and without blocking, checked again through the open descriptor, and read up to a
size cap.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from pathlib import Path

from worker.errors import ConfigError

#: The byte-order mark some editors put at the start of a UTF-8 file.
UTF8_BOM = b"\xef\xbb\xbf"
#: A Git LFS pointer file is smaller than this (Git LFS pointer specification).
MAX_LFS_POINTER_BYTES = 1024
#: Largest dataset file read, bytes (64 MiB): examples (worker/evals/config/dataset.py) or
#: multiple-choice questions (worker/evals/config/mc_dataset.py).
MAX_DATASET_BYTES = 64 << 20
#: Most examples in one dataset (and in one suite: worker/evals/config/consistency.py).
MAX_EXAMPLES = 100_000
#: Largest ``.gitmodules`` read, bytes.
MAX_GITMODULES_BYTES = 64 << 10
#: A ``path = ...`` line of ``.gitmodules`` (git-config syntax; the value may be quoted).
_GITMODULES_PATH = re.compile(r'^\s*path\s*=\s*"?(?P<path>[^"\n]*?)"?\s*$', re.MULTILINE)
#: First lines of a Git LFS pointer file (the current spec URL, and the early one).
LFS_VERSION_LINES = (b"version https://git-lfs.github.com/spec/v1\n",
                     b"version https://hawser.github.com/spec/v1\n")


def repo_path(root: Path, rel_path: str) -> Path:
    """Return the real path of ``rel_path`` inside the checkout ``root``.

    Raises:
        ConfigError: ``rel_path`` is absolute, or leads outside ``root`` through ``..`` or a
            symlink (every component is resolved).
    """
    if Path(rel_path).is_absolute() or rel_path.startswith("\\"):
        raise ConfigError(rel_path, None, "the path must be relative to the repository root")
    real_root = root.resolve()
    path = (real_root / rel_path).resolve()
    if not path.is_relative_to(real_root):
        raise ConfigError(rel_path, None, "the path leads outside the repository (through `..` "
                          "or a symlink); keep the file in the repository")
    return path


def decode_utf8(data: bytes, rel_path: str) -> str:
    """Return ``data`` (a file of the repository at ``rel_path``) decoded as UTF-8 text.

    A byte-order mark at the very start (``EF BB BF``, which Windows editors write) is
    dropped; anywhere else U+FEFF stays in the text, where the file's own syntax decides (a
    dataset line that starts with one is invalid). A Git LFS pointer (`lfs_pointer`) is
    refused, saying what to do, rather than parsed as the file it stands for.

    Raises:
        ConfigError: not UTF-8 (the error names the 1-based line and the byte of that line
            where decoding failed, so the annotation lands on the line to fix), or an LFS
            pointer (on line 1).
    """
    pointer = lfs_pointer(data)
    if pointer is not None:
        raise ConfigError(rel_path, 1, lfs_message(rel_path, *pointer))
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(rel_path, line, f"not UTF-8 text at byte {column} of the line "
                          f"({exc.reason}); save the file as UTF-8") from None


def split_lines(text: str, keepends: bool = False) -> list[str]:
    """Split ``text`` into lines at ``\\n`` only (a ``\\r\\n`` line keeps its ``\\r``).

    GitHub, git and JSON count lines this way; ``str.splitlines`` also splits at ``\\r``,
    U+2028, U+2029, U+0085, ``\\v``, ``\\f`` and ``\\x1c``-``\\x1e``, which a cell or a
    string may hold (Python's own ``csv.writer`` leaves U+2028 unquoted), so it cut rows in
    two and put the line numbers of annotations off. ``keepends`` keeps each ``\\n``; a text
    ending in ``\\n`` has no empty last line then (as ``splitlines``).
    """
    if not keepends:
        return text.split("\n")
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def refuse_stray_bom(line_text: str, rel_path: str, line: int) -> None:
    """Refuse a line of a JSONL file that starts with a byte-order mark: only the file's first
    bytes may hold one (`decode_utf8`); files joined with ``cat`` keep each one's mark.

    Raises:
        ConfigError: ``line_text`` starts with U+FEFF (on ``line``).
    """
    if line_text.startswith("\ufeff"):
        raise ConfigError(rel_path, line, "a byte-order mark (U+FEFF) starts this line; only "
                          "the file's first bytes may hold one: remove it")


def lfs_pointer(data: bytes) -> tuple[str, int] | None:
    """Return ``(oid, size in bytes)`` when ``data`` is a Git LFS pointer file, else None.

    A pointer is what git stores for a file tracked by Git LFS when the LFS object was not
    downloaded: under 1024 bytes, a first line ``version https://git-lfs.github.com/spec/v1``
    (``https://hawser.github.com/spec/v1`` for early pointers), then ``oid sha256:<hex>`` and
    ``size <bytes>`` lines (Git LFS pointer specification, docs/spec.md of git-lfs/git-lfs).
    """
    if len(data) >= MAX_LFS_POINTER_BYTES or not data.startswith(LFS_VERSION_LINES):
        return None
    fields = dict(line.partition(" ")[::2] for line in data.decode("ascii", "replace")
                  .splitlines()[1:] if line)
    oid, size = fields.get("oid", ""), fields.get("size", "")
    if not oid.startswith("sha256:") or not size.isdigit():
        return None
    return oid, int(size)


def lfs_message(rel_path: str, oid: str, size: int) -> str:
    """What to say about a dataset, prompt or other file that is an LFS pointer."""
    return (f"this is a Git LFS pointer ({oid[:19]}..., {size} bytes), not the file: llmgate "
            "reads files as git stores them and never downloads LFS objects. Commit the file "
            f"to git itself (`git lfs untrack {rel_path}`, then `git add --renormalize "
            f"{rel_path}` and commit); for `llmgate run` on a working tree, `git lfs pull` "
            "first")


def read_repo_file(root: Path, rel_path: str, max_bytes: int) -> bytes:
    """Read a repository file that a config refers to, safely.

    The path is checked with `repo_path`, opened without following a final symlink and
    without blocking, checked again through the open descriptor (so a symlink swapped in
    after the check is caught), and read up to ``max_bytes``.

    Raises:
        ConfigError: escape, inside a git submodule (`submodule_of`), missing, not a regular
            file, larger than ``max_bytes`` (the message gives the size and the limit), or
            unreadable.
    """
    submodule = submodule_of(root, rel_path)
    if submodule is not None:
        raise ConfigError(rel_path, None, submodule_message(submodule))
    return _read(root, rel_path, max_bytes)


def _read(root: Path, rel_path: str, max_bytes: int) -> bytes:
    path = repo_path(root, rel_path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ConfigError(rel_path, None, "file not found (commit it, or fix the path in "
                          "the config)") from None
    except OSError as exc:
        raise ConfigError(rel_path, None, f"cannot be opened: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        real = Path(os.readlink(f"/proc/self/fd/{fd}")) if os.path.isdir("/proc/self/fd") \
            else path
        if not real.is_relative_to(root.resolve()):
            raise ConfigError(rel_path, None, "the path leads outside the repository")
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(rel_path, None, "not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise ConfigError(rel_path, None, f"the file is larger than {max_bytes} bytes "
                          f"({info.st_size} bytes); split it or make it smaller")
    return data


def submodule_of(root: Path, rel_path: str) -> str | None:
    """Return the git submodule of the checkout ``root`` that holds ``rel_path``, or None.

    A path is inside a submodule when an entry of the repository's ``.gitmodules`` (its
    ``path = ...``, git-config syntax, gitmodules(5)) is the path or one of its folders, or
    when one of its folders holds a ``.git`` (a submodule or nested repository checked out in a
    working tree). llmgate does not check out submodules (their fetch credentials would reach
    pull requests' targets), so such a file is never there on the worker; a working tree that
    has it is refused alike, so ``llmgate run`` says what the App would. A gitlink (tree mode
    160000) without a ``.gitmodules`` entry shows in a worker's checkout as an empty folder:
    the file is then reported missing.
    """
    parts = posixpath.normpath(rel_path.replace("\\", "/")).split("/")
    folders = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    listed = set(_gitmodules_paths(root))
    for folder in folders:
        if folder in listed:
            return folder
    for folder in folders[:-1]:
        if os.path.lexists(root / folder / ".git"):
            return folder
    return None


def submodule_message(submodule: str) -> str:
    """What to say about a file a config names inside the git submodule ``submodule``."""
    return (f"this path is inside the git submodule `{submodule}`, and llmgate does not check "
            "out submodules (their fetch credentials must never reach the targets it runs), so "
            "the file is not there: commit the data to this repository itself (outside "
            f"`{submodule}`) and point the config at it")


def _gitmodules_paths(root: Path) -> list[str]:
    """The ``path`` of every ``.gitmodules`` entry at ``root`` (none when absent, unreadable
    or not a regular file)."""
    try:
        data = _read(root, ".gitmodules", MAX_GITMODULES_BYTES)
    except ConfigError:
        return []
    text = data.decode("utf-8", "replace")
    return [posixpath.normpath(m["path"].strip()) for m in _GITMODULES_PATH.finditer(text)
            if m["path"].strip()]
