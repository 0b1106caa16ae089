"""Baseline stores for ``llmgate run`` without the App: a directory, Redis or a git ref.

``--baseline-store`` names one (`open_store`):

- a directory (``--baseline-store .llmgate-baselines``, e.g. a CI cache or artifact): one file
  per record, ``<dir>/<repo>/<sha>/<key digest>.rec``;
- ``redis`` (the Redis of ``REDIS_URL``, the App's own store: `BaselineStore`); a unix-socket
  Redis without a password is refused, as the worker refuses it
  (worker/runtime/hardening.check_redis_socket);
- ``git`` or ``git:refs/llmgate/<name>``: records are blobs (base64) in a commit under that
  ref of the repository itself (default `DEFAULT_REF`); ``llmgate baseline push`` pushes the
  ref to a remote, and a CI job fetches it (``git fetch origin '+refs/llmgate/*:refs/llmgate/*'``).

Every store holds the bytes of `worker.baselines.store.encode`, so a record means the same
wherever it is kept, and a record is reused only for exactly its commit and an equal key
(worker/baselines/reuse.py). An unreadable record is ignored (the suite runs again).
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from redis.asyncio import Redis
from redis.exceptions import RedisError

from worker.baselines.keys import BaselineKey
from worker.baselines.store import KEY_PREFIX, Baseline, BaselineStore, decode, encode
from worker.checkout import local_git
from worker.errors import ExecutionError
from worker.runtime import SettingsError, check_redis_socket

log = logging.getLogger("llmgate.baselines")

#: The ref ``--baseline-store git`` keeps records under.
DEFAULT_REF = "refs/llmgate/baselines"
_REF = re.compile(r"refs/llmgate/[A-Za-z0-9._/-]+\Z")
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
#: Who commits records under the ref (no user identity is needed or used).
_IDENTITY = {"GIT_AUTHOR_NAME": "llmgate", "GIT_AUTHOR_EMAIL": "llmgate@localhost",
             "GIT_COMMITTER_NAME": "llmgate", "GIT_COMMITTER_EMAIL": "llmgate@localhost"}


class Records(Protocol):
    """What `worker.baselines.reuse.StoredBaselines` needs of a store."""

    clock: Callable[[], float]

    async def get(self, repo: str, sha: str, key: BaselineKey) -> Baseline | None:
        """Return the record of ``key`` at ``sha``, or None."""

    async def put(self, baseline: Baseline) -> str | None:
        """Store ``baseline``; return None, or why it was not stored."""

    async def runs(self, repo: str, key: BaselineKey, limit: int) -> list[Baseline]:
        """Return up to ``limit`` records of ``key`` at any commit, newest first (flakiness
        evidence, worker/baselines/history.py); unreadable records are skipped."""


def _relative(repo: str, sha: str, key: BaselineKey) -> str:
    """The record's path inside a store: ``<repo>/<sha>/<digest>.rec`` (safe characters)."""
    parts = [_SAFE.sub("_", p) or "_" for p in repo.split("/")]
    return "/".join([*parts, _SAFE.sub("_", sha), f"{key.digest}.rec"])


def _matching(raw: bytes | None, sha: str, key: BaselineKey, where: str) -> Baseline | None:
    if raw is None:
        return None
    try:
        found = decode(raw)
    except ValueError as err:
        log.warning("ignoring baseline %s at %s (%s): %s", key.suite, sha[:7], where, err)
        return None
    return found if found.key == key and found.sha == sha else None


class DirectoryStore:
    """Records as files under one directory (see the module docstring)."""

    def __init__(self, root: Path, clock: Callable[[], float] = time.time) -> None:
        self.root = root
        self.clock = clock

    async def get(self, repo: str, sha: str, key: BaselineKey) -> Baseline | None:
        """Return the record of ``key`` at ``sha``, or None (absent or unreadable)."""
        path = self.root / _relative(repo, sha, key)
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        return _matching(raw, sha, key, str(path))

    async def put(self, baseline: Baseline) -> str | None:
        """Write the record (atomically: a temporary file renamed); None, or the OS's words."""
        path = self.root / _relative(baseline.repo, baseline.sha, baseline.key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as tmp:
                tmp.write(encode(baseline))
            os.replace(tmp.name, path)
        except OSError as err:
            return f"cannot write {path}: {err.strerror or err}"
        return None

    async def runs(self, repo: str, key: BaselineKey, limit: int) -> list[Baseline]:
        """Return up to ``limit`` records of ``key`` at any commit under the directory, newest
        first (see `Records.runs`)."""
        folder = (self.root / _relative(repo, "x", key)).parent.parent
        found = []
        for path in sorted(folder.glob(f"*/{key.digest}.rec")) if folder.is_dir() else ():
            try:
                record = _matching(path.read_bytes(), path.parent.name, key, str(path))
            except OSError:
                continue
            if record is not None:
                found.append(record)
        found.sort(key=lambda r: -r.created_at)
        return found[:limit]

    async def every_record(self) -> list[Baseline]:
        """Return every readable record under the directory, in path order (read-only:
        ``llmgate history``); unreadable files are logged and skipped.

        Raises:
            ExecutionError: the directory does not exist or cannot be listed.
        """
        if not self.root.is_dir():
            raise ExecutionError(f"baseline store {self.root}: not a directory")
        try:
            paths = sorted(self.root.rglob("*.rec"))
        except OSError as err:
            raise ExecutionError(f"baseline store {self.root}: {err.strerror or err}") from None
        found = []
        for path in paths:
            try:
                found.append(decode(path.read_bytes()))
            except (OSError, ValueError) as err:
                log.warning("ignoring baseline record %s: %s", path, err)
        return found


class GitRunner(Protocol):
    """Runs ``git args`` in a repository (worker/checkout.py `local_git`'s signature)."""

    async def __call__(self, repo_dir: Path, *args: str,
                       env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
        """Return (exit code, stdout, stderr)."""


class GitRefStore:
    """Records as blobs of commits under ``ref`` in the repository at ``repo_dir``.

    Each `put` outside a batch is one commit. Between `start_batch` and `commit_batch` the puts
    are held and written as one commit whose message lists them (``llmgate baseline push``:
    one commit per push). A commit's tree is its parent's (the ref's tip) plus the new files;
    the ref is moved with ``git update-ref REF NEW OLD``, so a writer that moved it meanwhile
    (a concurrent push) is never overwritten: the commit is rebuilt on the new tip and tried
    again, at most `MAX_TRIES` times. Nothing touches the working tree, the index or HEAD.
    """

    #: Commits tried per write when other writers keep moving the ref.
    MAX_TRIES = 5

    def __init__(self, repo_dir: Path, ref: str = DEFAULT_REF,
                 clock: Callable[[], float] = time.time, *, git: GitRunner = local_git) -> None:
        """Keep records under ``ref`` of ``repo_dir``; ``git`` runs git (default
        `worker.checkout.local_git`: the user's safe config, no hooks)."""
        self.repo_dir = repo_dir
        self.ref = ref
        self.clock = clock
        self.git = git
        self._held: dict[str, Baseline] | None = None

    async def _git(self, *args: str, env: Mapping[str, str] | None = None) -> tuple[int, str]:
        code, out, err = await self.git(self.repo_dir, *args, env=env)
        return code, out.strip() if code == 0 else f"git {args[0]} failed: {err.strip()}"

    async def get(self, repo: str, sha: str, key: BaselineKey) -> Baseline | None:
        """Return the record of ``key`` at ``sha`` (held in the batch, or under the ref), or
        None."""
        path = _relative(repo, sha, key)
        held = (self._held or {}).get(path)
        if held is not None:
            return held if held.key == key and held.sha == sha else None
        code, text = await self._git("cat-file", "blob", f"{self.ref}:{path}")
        try:
            raw = base64.b64decode(text, validate=True) if code == 0 else None
        except binascii.Error:
            raw = b"unreadable"
        return _matching(raw, sha, key, self.ref)

    async def put(self, baseline: Baseline) -> str | None:
        """Commit the record under the ref (hold it, in a batch); None, or git's words."""
        path = _relative(baseline.repo, baseline.sha, baseline.key)
        if self._held is not None:
            self._held[path] = baseline
            return None
        return await self._commit({path: baseline}, f"llmgate baseline {baseline.key.suite} "
                                                    f"at {baseline.sha[:12]}")

    def start_batch(self) -> None:
        """Hold every `put` from now on until `commit_batch`."""
        self._held = {}

    @property
    def held(self) -> tuple[Baseline, ...]:
        """The records put since `start_batch` and not committed yet."""
        return tuple((self._held or {}).values())

    async def commit_batch(self, title: str) -> str | None:
        """Write the held records as one commit and end the batch.

        The message is ``title``, a blank line and one line per record in the order put,
        ``<namespace>: <suite> at <sha12>``. Nothing is committed when nothing is held.

        Returns:
            None (committed, or nothing held), or git's words (nothing was stored).
        """
        held, self._held = self._held or {}, None
        if not held:
            return None
        lines = [f"{b.repo}: {b.key.suite} at {b.sha[:12]}" for b in held.values()]
        return await self._commit(held, "\n".join([title, "", *lines]) + "\n")

    async def _commit(self, records: Mapping[str, Baseline], message: str) -> str | None:
        """Commit ``records`` (path -> record) on the ref's tip and move the ref to it,
        rebuilding on a moved tip (see the class docstring); None, or why not stored."""
        with tempfile.TemporaryDirectory() as tmp:
            entries = await self._blobs(records, Path(tmp))
            if isinstance(entries, str):
                return entries
            index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            for _ in range(self.MAX_TRIES):
                parent = await self._tip()
                commit = await self._commit_on(parent, entries, message, index)
                if commit.startswith("git "):
                    return commit
                code, moved = await self._git("update-ref", self.ref, commit, parent)
                if code == 0:
                    return None
                if await self._tip() == parent:  # the ref did not move: git's own failure
                    return moved
                log.info("%s moved while committing; rebuilding on its new tip", self.ref)
        return (f"{self.ref} moved {self.MAX_TRIES} times while committing (other writers): "
                "not stored, run again")

    async def _blobs(self, records: Mapping[str, Baseline], tmp: Path) -> list[str] | str:
        """Write each record as a blob; return ``update-index --cacheinfo`` values, or
        git's words."""
        files = []
        for number, baseline in enumerate(records.values()):
            files.append(tmp / f"record{number}")
            files[-1].write_bytes(base64.b64encode(encode(baseline)))  # git's output is text
        code, out = await self._git("hash-object", "-w", "--", *map(str, files))
        if code != 0:
            return out
        return [f"100644,{blob},{path}" for blob, path in zip(out.split(), records, strict=True)]

    async def _tip(self) -> str:
        """The ref's commit, or "" when the ref does not exist."""
        code, tip = await self._git("rev-parse", "--verify", "-q", f"{self.ref}^{{commit}}")
        return tip if code == 0 else ""

    async def _commit_on(self, parent: str, entries: list[str], message: str,
                         index: Mapping[str, str]) -> str:
        """Return a new commit of ``parent``'s tree (none: empty) with ``entries`` added,
        or git's words (they start with ``git ``)."""
        cacheinfo = [arg for entry in entries for arg in ("--cacheinfo", entry)]
        tree = ""
        for args in (["read-tree", parent or "--empty"],
                     ["update-index", "--add", *cacheinfo], ["write-tree"]):
            code, tree = await self._git(*args, env=index)
            if code != 0:
                return tree
        parents = ["-p", parent] if parent else []
        code, commit = await self._git("commit-tree", tree, *parents, "-m", message,
                                       env=_IDENTITY)
        return commit

    async def runs(self, repo: str, key: BaselineKey, limit: int) -> list[Baseline]:
        """Return up to ``limit`` records of ``key`` at any commit under the ref, newest first
        (see `Records.runs`); no ref yet: none."""
        folder = _relative(repo, "x", key).rsplit("/", 2)[0]
        code, text = await self._git("ls-tree", "-r", "--name-only", self.ref, "--", folder)
        found = []
        for path in text.splitlines() if code == 0 else ():
            sha = path.rsplit("/", 2)[-2]
            if path.endswith(f"/{key.digest}.rec") and (
                    record := await self.get(repo, sha, key)) is not None:
                found.append(record)
        found.sort(key=lambda r: -r.created_at)
        return found[:limit]

    async def every_record(self) -> list[Baseline]:
        """Return every readable record under the ref, in path order (read-only: ``llmgate
        history``); no ref yet: none; unreadable blobs are logged and skipped.

        Raises:
            ExecutionError: ``repo_dir`` is not a git repository, or git failed.
        """
        code, text = await self._git("rev-parse", "--git-dir")
        if code != 0:
            raise ExecutionError(f"baseline store {self.ref}: {text}")
        if not await self._tip():
            return []
        code, text = await self._git("ls-tree", "-r", "--name-only", self.ref)
        if code != 0:
            raise ExecutionError(f"baseline store {self.ref}: {text}")
        found = []
        for path in text.splitlines():
            if not path.endswith(".rec"):
                continue
            code, blob = await self._git("cat-file", "blob", f"{self.ref}:{path}")
            try:
                found.append(decode(base64.b64decode(blob, validate=True)) if code == 0 else
                             decode(b""))
            except (ValueError, binascii.Error) as err:
                log.warning("ignoring baseline record %s:%s: %s", self.ref, path, err)
        return found


async def every_record(store: Records) -> list[Baseline]:
    """Return every readable record of ``store`` (`open_store`'s), read-only: a directory's
    and a git ref's (their ``every_record``), or every ``llmgate:baseline:`` key of a Redis
    `BaselineStore` (SCAN, not KEYS: the App's Redis keeps serving).

    Raises:
        ExecutionError: the store cannot be read (a missing directory, not a git repository,
            Redis refused or unreachable).
    """
    if isinstance(store, DirectoryStore | GitRefStore):
        return await store.every_record()
    if not isinstance(store, BaselineStore):
        raise ExecutionError(f"cannot list the records of {type(store).__name__}")
    found = []
    try:
        keys = [key async for key in store.redis.scan_iter(match=KEY_PREFIX + "*", count=500)]
        for start in range(0, len(keys), 100):
            for key, raw in zip(keys[start:start + 100],
                                await store.redis.mget(keys[start:start + 100]), strict=True):
                try:
                    found.append(decode(raw) if raw is not None else None)
                except ValueError as err:
                    log.warning("ignoring baseline record %r: %s", key, err)
    except (RedisError, OSError) as err:
        raise ExecutionError(f"baseline store redis: {err}") from None
    return [b for b in found if b is not None]


def open_store(spec: str, repo_dir: Path,
               environ: Mapping[str, str]) -> tuple[Records, Redis | None]:
    """Return the store ``--baseline-store spec`` names, and its Redis client to close (or
    None), for the repository at ``repo_dir``.

    Raises:
        ExecutionError: ``redis`` without ``REDIS_URL``, a unix-socket Redis without a
            password, or a ``git:`` ref not under ``refs/llmgate/``.
    """
    if spec == "redis":
        url = environ.get("REDIS_URL", "")
        if not url:
            raise ExecutionError("--baseline-store redis needs REDIS_URL")
        try:
            check_redis_socket("REDIS_URL", url)
        except SettingsError as err:
            raise ExecutionError(str(err)) from None
        redis = Redis.from_url(url)
        return BaselineStore(redis), redis
    if spec == "git" or spec.startswith("git:"):
        ref = spec[4:] or DEFAULT_REF if spec != "git" else DEFAULT_REF
        if not _REF.match(ref) or ".." in ref:
            raise ExecutionError(f"--baseline-store {spec}: the ref must be under refs/llmgate/"
                                 f", e.g. {DEFAULT_REF}")
        return GitRefStore(repo_dir, ref), None
    return DirectoryStore(Path(spec)), None
