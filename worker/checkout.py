"""Check out commits of untrusted repositories into throwaway git worktrees.

This is the only module that runs git. Each repository gets one bare mirror under
``<workdir>/mirrors/<owner>__<repo>.git``; each checkout is a detached worktree of that mirror
under ``<workdir>/worktrees/`` that is removed when its context exits.

Safety: git runs without a shell, with a minimal environment, no system or global config, hooks
disabled, no submodules and only the http(s) and file transports. An installation token is
handed to git through ``GIT_CONFIG_*`` environment variables (readable only by our own user,
unlike argv) and is never written to disk, to a remote URL or into a :class:`GitError`.
The module is longer than most because it keeps every git invocation in one place.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fcntl
import functools
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

FETCH_TIMEOUT_S = 300.0
LOCAL_TIMEOUT_S = 120.0
LOCK_TIMEOUT_S = 900.0
_SHA_RE = re.compile(r"[0-9a-fA-F]{40}(?:[0-9a-fA-F]{24})?")
# GitHub owners have no "__" and no leading/trailing "_", so "owner__repo" is unambiguous.
_KEY_RE = re.compile(r"([A-Za-z0-9](?:_?[A-Za-z0-9-])*)/([A-Za-z0-9._-]+)")
_HEADS = "+refs/heads/*:refs/heads/*"
_PULLS = "+refs/pull/*/head:refs/pull/*/head"
_SAFE_CONFIG = (
    "core.hooksPath=/dev/null", "core.fsmonitor=false", "credential.helper=",
    "submodule.recurse=false", "fetch.recurseSubmodules=false", "gc.autoDetach=false",
    "init.defaultBranch=main", "protocol.allow=never", "protocol.http.allow=always",
    "protocol.https.allow=always", "protocol.file.allow=user",
)
# gc.cruftPacks (git >= 2.37): commits no ref reaches any more (a force-pushed PR head, a
# sha fetched for one run) go into one "cruft" pack until they expire. Without it each gc
# writes them out as loose objects, thousands of files, which start automatic gc again.
_MIRROR_CONFIG = ("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n"
                  "[gc]\n\tcruftPacks = true\n")
_PASSTHROUGH = (
    "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH",
)


class GitError(Exception):
    """A git command failed or timed out.

    Attributes:
        command: The argv that failed, as ``["git", subcommand, ...]``, secrets redacted.
        stderr: What git printed on stderr (or why we gave up), secrets redacted.
        timed_out: True when the command was killed after its timeout.
    """

    def __init__(self, command: Sequence[str], stderr: str, secrets: Sequence[str] = (),
                 *, timed_out: bool = False, summary: str | None = None) -> None:
        """``summary``, when given, is the whole message (a user's words, not git's argv)."""
        self.command = [_redact(part, secrets) for part in command]
        self.stderr = _redact(stderr, secrets).strip()
        self.timed_out = timed_out
        super().__init__(summary or f"`{' '.join(self.command)}` failed: {self.stderr}")


def _redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def check_sha(sha: str) -> str:
    """Return ``sha`` in lower case if it is a full SHA-1 (40) or SHA-256 (64) hex id.

    Raises:
        ValueError: Anything else, including abbreviations, ref names and options.
    """
    if not isinstance(sha, str) or not _SHA_RE.fullmatch(sha):
        raise ValueError(f"expected a full 40- or 64-hex-digit commit sha, got {sha!r:.80}")
    return sha.lower()


def check_clone_url(url: str) -> None:
    """Accept an ``http(s)://`` or ``file://`` URL or an absolute local path.

    Raises:
        ValueError: An option-like, credential-bearing or otherwise unsupported URL.
    """
    if not url or url.startswith("-") or any(ord(c) < 0x20 or c == "\x7f" for c in url):
        raise ValueError(f"unusable clone URL {url!r:.200}")
    parts = urlsplit(url)
    if parts.scheme in ("http", "https"):
        if not parts.hostname:
            raise ValueError(f"clone URL {url!r:.200} has no host")
        if "@" in parts.netloc:
            raise ValueError("clone URL must not carry credentials; pass token= instead")
    elif not (parts.scheme == "file" or (parts.scheme == "" and url.startswith("/"))):
        raise ValueError(f"clone URL {url!r:.200}: only http(s)://, file:// or /abs/path")


def _mirror_name(repo_key: str) -> str:
    match = _KEY_RE.fullmatch(repo_key)
    if match is None or match.group(2) in (".", ".."):
        raise ValueError(f"repo_key must look like 'owner/repo', got {repo_key!r:.200}")
    return f"{match.group(1)}__{match.group(2)}".lower()


def _auth_env(clone_url: str, token: str | None) -> tuple[dict[str, str], list[str]]:
    """Git config (as env) sending ``token`` as HTTP basic auth, and the strings to redact."""
    if not token or urlsplit(clone_url).scheme not in ("http", "https"):
        return {}, []
    b64 = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    env = {"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "http.extraheader",
           "GIT_CONFIG_VALUE_0": f"AUTHORIZATION: basic {b64}",
           "GIT_CONFIG_KEY_1": "http.followRedirects", "GIT_CONFIG_VALUE_1": "false"}
    return env, [token, b64]


def _base_env(home: Path) -> dict[str, str]:
    env = {name: os.environ[name] for name in _PASSTHROUGH if name in os.environ}
    env.update({
        "PATH": os.environ.get("PATH", os.defpath), "HOME": str(home), "LANG": "C",
        "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull, "GIT_ATTR_NOSYSTEM": "1", "GIT_NO_REPLACE_OBJECTS": "1",
    })
    return env


def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # git's helpers share its process group


async def _exec(args: Sequence[str], *, cwd: Path | None, env: Mapping[str, str],
                timeout_s: float, secrets: Sequence[str] = ()) -> tuple[int, str, str]:
    """Run ``git <safe config> args``; return (exit code, stdout, stderr).

    Raises:
        GitError: The command ran longer than ``timeout_s`` seconds (it is killed).
    """
    argv = ["git"]
    for item in _SAFE_CONFIG:
        argv += ["-c", item]
    proc = await asyncio.create_subprocess_exec(
        *argv, *args, cwd=cwd, env=dict(env), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        _kill(proc)
        await proc.wait()
        raise GitError(["git", *args], f"timed out after {timeout_s:g} s", secrets,
                       timed_out=True) from None
    except BaseException:
        _kill(proc)
        raise
    code = proc.returncode if proc.returncode is not None else -1
    return code, out.decode(errors="replace"), err.decode(errors="replace")


async def _run(args: Sequence[str], *, cwd: Path | None, env: Mapping[str, str],
               timeout_s: float = LOCAL_TIMEOUT_S, secrets: Sequence[str] = ()) -> str:
    """Run git like :func:`_exec`; return stdout or raise :class:`GitError` on a non-zero exit."""
    code, out, err = await _exec(args, cwd=cwd, env=env, timeout_s=timeout_s, secrets=secrets)
    if code != 0:
        raise GitError(["git", *args], err or f"exit code {code}", secrets)
    return out


async def _flock(fd: int, timeout_s: float) -> None:
    """Take an exclusive ``flock`` on ``fd``, polling so that cancellation stays possible."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if loop.time() > deadline:
                raise TimeoutError(f"mirror lock still busy after {timeout_s:g} s") from None
            await asyncio.sleep(0.05)


def _clear_stale_locks(mirror: Path) -> None:
    """Remove git's lock files from ``mirror``; call only while holding its flock.

    git removes a ``*.lock`` it made when it exits or gets a catchable signal, but a fetch we
    SIGKILL (a cancelled run, a timeout) or a worker killed outright leaves its ref locks, and
    every later fetch then fails "cannot lock ref ...: File exists". Every git command of
    ours that writes a mirror runs under its flock, so a lock found while we hold it belongs
    to no live process of ours.
    """
    for pattern in ("*.lock", "refs/**/*.lock", "objects/*.lock", "objects/info/**/*.lock"):
        for lock in mirror.glob(pattern):  # objects/maintenance.lock stops automatic gc
            if lock.is_file() and not lock.is_symlink():
                lock.unlink(missing_ok=True)
    for keep in mirror.glob("objects/pack/pack-*.keep"):  # a fetch's own, kept from any gc
        with contextlib.suppress(OSError):
            if keep.read_bytes().startswith((b"fetch-pack ", b"receive-pack ")):
                keep.unlink()


def remove_tree(path: Path) -> None:
    """Remove ``path`` and everything below it, as ``rm -rf`` would; never raises.

    A run may leave folders without write permission (``chmod -R a-w``, Go's module cache):
    without root, nothing inside them can be unlinked and ``shutil.rmtree`` fails, so the
    worktree would stay for good. Those folders are made writable first (symlinks are never
    followed), then removed.
    """
    shutil.rmtree(path, ignore_errors=True)
    if not path.exists() or path.is_symlink():
        return
    with contextlib.suppress(OSError):
        path.chmod(stat.S_IRWXU)
    for root, dirs, _ in os.walk(path):  # top-down: a folder is opened after its chmod
        for name in dirs:
            child = Path(root, name)
            if not child.is_symlink():
                with contextlib.suppress(OSError):
                    child.chmod(stat.S_IRWXU)
    shutil.rmtree(path, ignore_errors=True)


def _hold(folder: Path) -> int:
    """Take a shared ``flock`` on ``folder`` (a worktree in use); return the descriptor.

    Closing it, or the death of the process, releases it: `_drop_broken_worktrees` then knows
    the worktree is nobody's.
    """
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd


def _in_use(folder: Path) -> bool:
    """True while a process holds ``folder`` with `_hold`."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:  # e.g. out of descriptors: when in doubt, it is someone's
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _drop_broken_worktrees(mirror: Path) -> None:
    """Remove worktrees of ``mirror`` nobody uses, then the entries of folders that are gone;
    call only under the mirror's flock.

    A worktree is in use while its run holds it (`_hold`, taken before ``worktree add``'s
    flock is let go). One nobody holds was left behind: its run was cancelled while it waited
    to remove it, its worker was killed, or ``worktree add`` itself was killed. The last
    leaves an entry with a null ``HEAD`` and a ``locked`` file that ``worktree prune`` never
    removes, and that null ``HEAD`` makes every ``--all`` walk fail "bad object", so no commit
    would ever count as fetched again. Removing the folder, then every entry whose folder is
    gone, covers all three.
    """
    ours = mirror.parent.parent / "worktrees"
    name = re.compile(rf"{re.escape(mirror.name.removesuffix('.git'))}-[0-9a-fA-F]{{12}}-\w{{8}}")
    if ours.is_dir():
        for left in ours.iterdir():
            if name.fullmatch(left.name) and left.is_dir() and not _in_use(left):
                remove_tree(left)
    admin = mirror / "worktrees"
    if not admin.is_dir():
        return
    for entry in admin.iterdir():
        try:
            gone = not Path((entry / "gitdir").read_text(encoding="utf-8").strip()).parent.is_dir()
        except (OSError, UnicodeDecodeError):
            gone = True
        if gone:
            shutil.rmtree(entry, ignore_errors=True)


def _reset_config(mirror: Path) -> None:
    """Rewrite the mirror's config, undoing anything code run in a worktree may have added.

    A worktree's ``.git`` points at the shared mirror, so an eval of an untrusted pull request
    could add e.g. ``url.<evil>.insteadOf`` and have our next fetch send the token elsewhere.
    """
    tmp = mirror / "config.llmgate-tmp"
    tmp.write_text(_MIRROR_CONFIG)
    tmp.replace(mirror / "config")


async def _add_worktree(git_dir: Path, parent: Path, sha: str, prefix: str,
                        env: Mapping[str, str]) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        await _run(["worktree", "add", "--quiet", "--detach", str(path), sha], cwd=git_dir,
                   env=env)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return path


async def _remove_worktree(git_dir: Path, path: Path, env: Mapping[str, str]) -> None:
    try:
        await _run(["worktree", "remove", "--force", "--force", str(path)], cwd=git_dir, env=env)
    except GitError:
        remove_tree(path)
    with contextlib.suppress(GitError):  # a stale entry is pruned next time; keep the real error
        await _run(["worktree", "prune"], cwd=git_dir, env=env)


class Checkouts:
    """Bare mirrors and throwaway worktrees under one working directory.

    Several instances (in one or several processes) may share ``workdir``: each mirror is
    guarded by an :class:`asyncio.Lock` and an ``fcntl.flock`` on ``mirrors/<name>.lock``.

    Attributes:
        clone_count: Mirrors this instance created (for tests and metrics).
        fetch_count: ``git fetch`` commands this instance ran.
    """

    def __init__(self, workdir: Path, *, protocol_version: int = 2) -> None:
        """Use ``workdir`` (created on first use).

        Args:
            workdir: Root directory, usually from ``LLMGATE_WORKDIR``.
            protocol_version: Git wire protocol; 0 or 1 only for servers without v2, which
                refuse fetching an unadvertised sha (we then fetch all heads and PR refs).

        Raises:
            ValueError: ``protocol_version`` is not 0, 1 or 2.
        """
        if protocol_version not in (0, 1, 2):
            raise ValueError(f"protocol_version must be 0, 1 or 2, got {protocol_version!r}")
        self.workdir = workdir.absolute()
        self.clone_count = 0
        self.fetch_count = 0
        self._protocol_version = protocol_version
        self._locks: dict[Path, asyncio.Lock] = {}

    def _env(self) -> dict[str, str]:
        home = self.workdir / "home"
        for sub in (home, self.workdir / "mirrors", self.workdir / "worktrees"):
            sub.mkdir(parents=True, exist_ok=True)
        return _base_env(home)

    @contextlib.asynccontextmanager
    async def worktree(self, repo_key: str, clone_url: str, sha: str,
                       token: str | None = None) -> AsyncIterator[Path]:
        """Yield a detached worktree of ``sha``; remove it on exit, even after an error.

        Args:
            repo_key: ``"owner/repo"``; names the mirror.
            clone_url: ``https://...`` (GitHub's ``clone_url``), ``file://...`` or ``/abs/path``.
            sha: Full commit id; fetched only when the mirror lacks it.
            token: Installation access token, sent only to http(s) URLs, never stored.

        Raises:
            ValueError: A malformed ``repo_key``, ``clone_url`` or ``sha``.
            GitError: Fetching or checking out failed (including a sha the remote lacks).
            TimeoutError: Another process held the mirror lock for ``LOCK_TIMEOUT_S`` s.
        """
        sha = check_sha(sha)
        check_clone_url(clone_url)
        name = _mirror_name(repo_key)
        env = self._env()
        mirror = self.workdir / "mirrors" / f"{name}.git"
        async with self._locked(mirror):
            await self._ensure(mirror, clone_url, [sha], token, env)
            path = await _add_worktree(mirror, self.workdir / "worktrees", sha,
                                       f"{name}-{sha[:12]}-", env)
            held = _hold(path)  # before the mirror's flock is let go: never looks unused
        try:
            yield path
        finally:
            try:
                async with self._locked(mirror):
                    _reset_config(mirror)
                    await _remove_worktree(mirror, path, env)
            finally:  # cancelled before it was removed: the next fetch removes it
                os.close(held)

    async def merge_base(self, repo_key: str, clone_url: str, a: str, b: str,
                         token: str | None = None) -> str:
        """Return the best common ancestor of commits ``a`` and ``b`` (``git merge-base``).

        Raises:
            ValueError: Malformed arguments, as for :meth:`worktree`.
            GitError: Fetching failed, or the commits share no history.
        """
        shas = [check_sha(a), check_sha(b)]
        async with self._fetched(repo_key, clone_url, shas, token) as (mirror, env):
            code, out, err = await _exec(["merge-base", *shas], cwd=mirror, env=env,
                                         timeout_s=LOCAL_TIMEOUT_S)
        if code != 0:
            raise GitError(["git", "merge-base", *shas], err or "the commits share no history")
        return out.strip()

    async def merge_result(self, repo_key: str, clone_url: str, tip: str, head: str,
                           token: str | None = None) -> str | None:
        """Return the SHA of a commit that merges ``head`` into ``tip`` (what merging a pull
        request makes), written to the mirror; None when the two conflict (`_merge_commit`).

        Raises:
            ValueError: Malformed arguments, as for :meth:`worktree`.
            GitError: Fetching or the merge failed otherwise (git older than 2.38 lacks
                ``merge-tree --write-tree``).
        """
        shas = [check_sha(tip), check_sha(head)]
        async with self._fetched(repo_key, clone_url, shas, token) as (mirror, env):
            return await _merge_commit(mirror, shas[0], shas[1], env)

    async def changed_files(self, repo_key: str, clone_url: str, a: str, b: str,
                            token: str | None = None) -> list[str]:
        """Return the paths that differ between commits ``a`` and ``b`` (``git diff
        --name-only``), sorted; a renamed file is listed under its old and its new path.

        Raises:
            ValueError: Malformed arguments, as for :meth:`worktree`.
            GitError: Fetching or the diff failed.
        """
        shas = [check_sha(a), check_sha(b)]
        async with self._fetched(repo_key, clone_url, shas, token) as (mirror, env):
            out = await _run(["diff", "--name-only", "-z", "--no-renames", "--no-ext-diff",
                              "--no-textconv", *shas, "--"], cwd=mirror, env=env)
        return sorted(path for path in out.split("\0") if path)

    @contextlib.asynccontextmanager
    async def _fetched(self, repo_key: str, clone_url: str, shas: list[str],
                       token: str | None) -> AsyncIterator[tuple[Path, dict[str, str]]]:
        """Hold the mirror of ``repo_key`` locked with ``shas`` fetched; yield (mirror, git
        environment) for commands that read it.

        Raises:
            ValueError: a malformed clone URL.
            GitError: fetching failed.
        """
        check_clone_url(clone_url)
        env = self._env()
        mirror = self.workdir / "mirrors" / f"{_mirror_name(repo_key)}.git"
        async with self._locked(mirror):
            await self._ensure(mirror, clone_url, shas, token, env)
            yield mirror, env

    @contextlib.asynccontextmanager
    async def _locked(self, mirror: Path) -> AsyncIterator[None]:
        async with self._locks.setdefault(mirror, asyncio.Lock()):
            fd = os.open(mirror.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                await _flock(fd, LOCK_TIMEOUT_S)
                yield
            finally:
                os.close(fd)  # closing the descriptor releases the flock

    async def _ensure(self, mirror: Path, url: str, shas: list[str], token: str | None,
                      env: dict[str, str]) -> None:
        """Create ``mirror`` if needed and fetch whichever of ``shas`` it lacks."""
        if not (mirror / "HEAD").is_file():
            await self._init_mirror(mirror, env)
        _clear_stale_locks(mirror)
        _drop_broken_worktrees(mirror)
        _reset_config(mirror)
        missing = [sha for sha in shas if not await self._has_commit(mirror, sha, env)]
        if not missing:
            return
        try:  # protocol v2 servers (GitHub, git >= 2.18) hand out any sha they have
            await self._fetch(mirror, url, [_HEADS, *missing], token, env)
        except GitError as exc:
            if exc.timed_out:
                raise
            await self._fetch(mirror, url, [_HEADS, _PULLS], token, env)
        for sha in missing:
            if not await self._has_commit(mirror, sha, env):
                raise GitError(["git", "fetch", url], f"commit {sha} not found at {url}")

    async def _init_mirror(self, mirror: Path, env: Mapping[str, str]) -> None:
        shutil.rmtree(mirror, ignore_errors=True)  # a leftover without HEAD is unusable
        tmp = Path(tempfile.mkdtemp(prefix=".init-", dir=mirror.parent))
        try:
            await _run(["init", "--quiet", "--bare", str(tmp)], cwd=None, env=env)
            tmp.rename(mirror)  # atomic: other processes see no mirror or a whole one
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.clone_count += 1

    async def _has_commit(self, mirror: Path, sha: str, env: Mapping[str, str]) -> bool:
        """True when ``sha`` is a commit whose every object is in the mirror.

        A fetch killed while it unpacks (a superseded run is cancelled, a timeout) leaves some
        loose objects: the commit comes first, its trees and blobs may not. Asking for the
        commit alone then said "present", and every later worktree of it failed with "unable
        to read tree". ``rev-list --objects <sha> --not --all`` walks the objects the commit
        adds over the mirror's refs (which a fetch moves only once its objects are all in)
        and fails on a missing one, as git's own connectivity check after a fetch does; a
        refetch then brings them.
        """
        code, _, _ = await _exec(["rev-list", "--quiet", "--objects", f"{sha}^{{commit}}",
                                  "--not", "--all"], cwd=mirror, env=env,
                                 timeout_s=LOCAL_TIMEOUT_S)
        return code == 0

    async def _fetch(self, mirror: Path, url: str, refspecs: list[str], token: str | None,
                     env: Mapping[str, str]) -> None:
        auth, secrets = _auth_env(url, token)
        self.fetch_count += 1
        await _run(["-c", f"protocol.version={self._protocol_version}", "fetch", "--quiet",
                    "--no-tags", "--prune", "--no-write-fetch-head", "--no-recurse-submodules",
                    url, *refspecs], cwd=mirror, env={**env, **auth},
                   timeout_s=FETCH_TIMEOUT_S, secrets=secrets)


def _local_env() -> dict[str, str]:
    return _base_env(Path(os.environ.get("HOME", "/")))


async def resolve_ref(repo_dir: Path, ref: str) -> str:
    """Return the commit sha that ``ref`` (branch, tag, ``HEAD~2``, sha ...) names.

    Raises:
        ValueError: ``ref`` is empty or starts with ``-``.
        GitError: ``repo_dir`` is not a git repository or ``ref`` names no commit.
    """
    if not ref or ref.startswith("-"):
        raise ValueError(f"expected a ref name or sha, got {ref!r:.80}")
    args = ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"]
    code, out, err = await _exec(args, cwd=repo_dir, env=_local_env(), timeout_s=LOCAL_TIMEOUT_S)
    if code != 0:
        unknown = f"{ref!r} names no commit in {repo_dir}"
        raise GitError(["git", *args], err or unknown, summary=None if err else unknown)
    return out.strip()


async def local_git(repo_dir: Path, *args: str,
                    env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    """Run ``git args`` in the user's repository ``repo_dir`` (its safe config, no stdin, the
    local time limit) with ``env`` added to the environment; return (exit code, stdout, stderr).

    Raises:
        GitError: git ran longer than `LOCAL_TIMEOUT_S` seconds.
    """
    return await _exec(args, cwd=repo_dir, env={**_local_env(), **(env or {})},
                       timeout_s=LOCAL_TIMEOUT_S)


async def local_merge_base(repo_dir: Path, a: str, b: str) -> str | None:
    """Return the best common ancestor of commits ``a`` and ``b`` of the user's repository
    ``repo_dir`` (``git merge-base``), or None when they share no history.

    Raises:
        ValueError: ``a`` or ``b`` is not a full SHA.
        GitError: git failed otherwise (exit status other than 0 and 1).
    """
    args = ["merge-base", check_sha(a), check_sha(b)]
    code, out, err = await _exec(args, cwd=repo_dir, env=_local_env(), timeout_s=LOCAL_TIMEOUT_S)
    if code == 1 and not out.strip():  # git's answer for unrelated histories
        return None
    if code != 0:
        raise GitError(["git", *args], err or f"git merge-base exited {code}")
    return out.strip()


#: Author, committer and date of the merge commits llmgate makes (`_merge_commit`): fixed, so
#: the same two commits always make the same merge SHA, and responses cached by it are reused.
_MERGE_IDENTITY = {
    "GIT_AUTHOR_NAME": "llmgate", "GIT_AUTHOR_EMAIL": "llmgate@localhost",
    "GIT_AUTHOR_DATE": "@0 +0000", "GIT_COMMITTER_NAME": "llmgate",
    "GIT_COMMITTER_EMAIL": "llmgate@localhost", "GIT_COMMITTER_DATE": "@0 +0000",
}


async def _merge_commit(repo: Path, tip: str, head: str, env: Mapping[str, str]) -> str | None:
    """Merge ``head`` into ``tip`` in ``repo`` without a working tree (``git merge-tree
    --write-tree``, git >= 2.38) and commit the result with parents ``tip`` and ``head``; return
    its SHA, or None when the merge has conflicts (``merge-tree`` exits 1). Only objects are
    written; no ref, index or working tree changes.

    Raises:
        GitError: git failed otherwise.
    """
    args = ["merge-tree", "--write-tree", "--no-messages", tip, head]
    code, out, err = await _exec(args, cwd=repo, env=env, timeout_s=LOCAL_TIMEOUT_S)
    if code == 1:
        return None
    if code != 0:
        raise GitError(["git", *args], err or f"git merge-tree exited {code}")
    tree = check_sha(out.split("\n", 1)[0].strip())
    return (await _run(["commit-tree", tree, "-p", tip, "-p", head, "-m",
                        f"llmgate: {head[:12]} merged into {tip[:12]}"],
                       cwd=repo, env={**env, **_MERGE_IDENTITY})).strip()


async def local_merge_result(repo_dir: Path, tip: str, head: str) -> str | None:
    """Return the SHA of a commit of the user's repository ``repo_dir`` that merges ``head``
    into ``tip``, or None when they conflict (`_merge_commit`: objects only, no ref moves).

    The merge reads no attributes of what is checked out: git takes ``merge`` attributes
    (``-merge``, ``binary``, merge drivers) from the working tree's ``.gitattributes`` and the
    index, and in a CI job those are the pull request's (GitHub's merge ref), so a pull request
    could make its own merge conflict and be compared with its merge base instead (fresh user,
    issue 30). It runs with an empty working tree and index, as the App's bare mirror does,
    so both merge alike (only ``$GIT_DIR/info/attributes``, the user's own, still applies).

    Raises:
        ValueError: ``tip`` or ``head`` is not a full SHA.
        GitError: git failed otherwise.
    """
    tip, head = check_sha(tip), check_sha(head)
    git_dir = (await _run(["rev-parse", "--absolute-git-dir"], cwd=repo_dir,
                          env=_local_env())).strip()
    with tempfile.TemporaryDirectory(prefix="llmgate-merge-") as empty:
        env = {**_local_env(), "GIT_DIR": git_dir, "GIT_WORK_TREE": empty,
               "GIT_INDEX_FILE": os.path.join(empty, "index")}
        return await _merge_commit(Path(empty), tip, head, env)


async def local_is_clean(repo_dir: Path) -> bool:
    """Whether the tracked files of ``repo_dir``'s working tree equal its ``HEAD`` commit:
    nothing modified or staged (``git status --porcelain --untracked-files=no``). Untracked
    files are in no commit, so no pull request holds them: a CI job's own cache folder in
    the checkout made a head behind its base be compared with its merge base (fresh user,
    issue 30).

    Raises:
        GitError: git failed.
    """
    out = await _run(["status", "--porcelain", "-z", "--untracked-files=no"], cwd=repo_dir,
                     env=_local_env())
    return not out.strip("\0")


@contextlib.asynccontextmanager
async def local_worktree(repo_dir: Path, ref: str) -> AsyncIterator[Path]:
    """Yield a temporary detached worktree of ``ref`` from the user's repository ``repo_dir``.

    The worktree lives in a fresh temp directory and is removed (and pruned from
    ``repo_dir``) on exit, even after an error. The user's hooks do not run.

    Raises:
        ValueError: ``ref`` is empty or starts with ``-``.
        GitError: As for :func:`resolve_ref`, or the checkout failed.
    """
    sha = await resolve_ref(repo_dir, ref)
    env = _local_env()
    parent = Path(tempfile.mkdtemp(prefix="llmgate-"))
    try:
        path = await _add_worktree(repo_dir, parent, sha, "wt-", env)
        try:
            yield path
        finally:
            await _remove_worktree(repo_dir, path, env)
    finally:
        remove_tree(parent)
        forget_worktrees(repo_dir, parent, env)


def forget_worktrees(repo_dir: Path, parent: Path, env: Mapping[str, str]) -> None:
    """Deregister from ``repo_dir`` every worktree under ``parent`` that is still registered,
    synchronously; never raises.

    The awaited removal above can be cut short: an interrupt that lands while ``git worktree
    add`` runs kills it with its worktree registered and locked ("initializing", which ``git
    worktree prune`` leaves alone), and a run cancelled again while it removes one leaves the
    entry. A CI runner's SIGTERM under load left one registered in the user's repository (CI
    of issue 32's stop). Here no ``await`` can be cancelled: one ``git worktree list`` (a few
    milliseconds), and ``git worktree remove --force --force`` for what it still names under
    ``parent`` (that also drops a locked entry whose folder is gone).
    """
    git = ["git", *(arg for item in _SAFE_CONFIG for arg in ("-c", item))]
    run = functools.partial(subprocess.run, cwd=repo_dir, env=dict(env), capture_output=True,
                            text=True, timeout=LOCAL_TIMEOUT_S, check=False,
                            stdin=subprocess.DEVNULL)
    under = parent.resolve()
    try:
        listed = run([*git, "worktree", "list", "--porcelain", "-z"]).stdout
        for field in listed.split("\0"):
            path = Path(field.removeprefix("worktree ")) if field.startswith("worktree ") \
                else None
            if path is not None and under in path.resolve().parents:
                run([*git, "worktree", "remove", "--force", "--force", str(path)])
    except (OSError, subprocess.SubprocessError):
        pass


async def local_default_branch(repo_dir: Path) -> str | None:
    """Return the default branch of the user's repository ``repo_dir``: the branch
    ``refs/remotes/origin/HEAD`` points at, else a local ``main`` or ``master``; None when
    none is known.

    Raises:
        GitError: a git command ran longer than its time limit.
    """
    env = _local_env()
    code, out, _ = await _exec(["symbolic-ref", "--quiet", "--short",
                                "refs/remotes/origin/HEAD"], cwd=repo_dir, env=env,
                               timeout_s=LOCAL_TIMEOUT_S)
    if code == 0 and out.strip().startswith("origin/"):
        return out.strip().removeprefix("origin/")
    for branch in ("main", "master"):
        code, _, _ = await _exec(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
                                 cwd=repo_dir, env=env, timeout_s=LOCAL_TIMEOUT_S)
        if code == 0:
            return branch
    return None


async def local_is_ancestor(repo_dir: Path, sha: str, ref: str) -> bool:
    """Return whether commit ``sha`` is ``ref`` or one of its ancestors (``git merge-base
    --is-ancestor``) in the user's repository ``repo_dir``.

    Raises:
        ValueError: ``sha`` is not a full SHA.
        GitError: git failed otherwise (exit status other than 0 and 1).
    """
    args = ["merge-base", "--is-ancestor", check_sha(sha), await resolve_ref(repo_dir, ref)]
    code, _, err = await _exec(args, cwd=repo_dir, env=_local_env(), timeout_s=LOCAL_TIMEOUT_S)
    if code not in (0, 1):
        raise GitError(["git", *args], err or f"git merge-base exited {code}")
    return code == 0


async def local_origin(repo_dir: Path) -> str | None:
    """Return ``owner/name`` of the user's repository from its ``origin`` remote's URL
    (``https://host/owner/name.git`` or ``git@host:owner/name``), or None without one."""
    code, out, _ = await _exec(["remote", "get-url", "origin"], cwd=repo_dir,
                               env=_local_env(), timeout_s=LOCAL_TIMEOUT_S)
    parts = out.strip().removesuffix("/").removesuffix(".git").replace(":", "/").split("/")
    if code != 0 or len(parts) < 2 or not parts[-1] or not parts[-2]:
        return None
    return f"{parts[-2]}/{parts[-1]}"
