"""Tests for worker.checkout against real git repositories built in tmp_path."""

from __future__ import annotations

import asyncio
import base64
import fcntl
import http.server
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port
from worker.checkout import (
    Checkouts,
    GitError,
    forget_worktrees,
    local_worktree,
    resolve_ref,
)

KEY = "octo/demo"


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` with a throwaway identity; return stdout."""
    done = subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        cwd=cwd, check=True, capture_output=True, text=True,
        env={"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"},
    )
    return done.stdout.strip()


def commit(repo: Path, text: str) -> str:
    """Write ``text`` to a.txt, commit it, return the new sha."""
    (repo / "a.txt").write_text(text)
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", text)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture()
def origin(tmp_path: Path) -> Path:
    repo = tmp_path / "origin"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    return repo


@pytest.fixture()
def checkouts(tmp_path: Path) -> Checkouts:
    return Checkouts(tmp_path / "work")


def worktree_list(git_dir: Path) -> list[str]:
    return [line for line in git(git_dir, "worktree", "list", "--porcelain").splitlines()
            if line.startswith("worktree ")]


async def test_two_shas_at_once_then_both_removed(origin: Path, checkouts: Checkouts) -> None:
    base, head = commit(origin, "base"), commit(origin, "head")
    async with checkouts.worktree(KEY, str(origin), base) as base_dir, \
            checkouts.worktree(KEY, str(origin), head) as head_dir:
        assert (base_dir / "a.txt").read_text() == "base"
        assert (head_dir / "a.txt").read_text() == "head"
        assert base_dir.parent == checkouts.workdir / "worktrees"
    assert not base_dir.exists() and not head_dir.exists()
    mirror = checkouts.workdir / "mirrors" / "octo__demo.git"
    assert len(worktree_list(mirror)) == 1  # only the bare mirror itself
    assert list((checkouts.workdir / "worktrees").iterdir()) == []


async def test_second_call_neither_clones_nor_fetches(origin: Path, checkouts: Checkouts) -> None:
    first, second = commit(origin, "1"), commit(origin, "2")
    async with checkouts.worktree(KEY, str(origin), second):
        pass
    assert (checkouts.clone_count, checkouts.fetch_count) == (1, 1)
    async with checkouts.worktree(KEY, f"file://{origin}", first) as path:
        assert (path / "a.txt").read_text() == "1"  # came with main's history
    assert (checkouts.clone_count, checkouts.fetch_count) == (1, 1)


async def test_commit_added_later_is_fetched(origin: Path, checkouts: Checkouts) -> None:
    async with checkouts.worktree(KEY, str(origin), commit(origin, "old")):
        pass
    new = commit(origin, "new")
    async with checkouts.worktree(KEY, str(origin), new) as path:
        assert (path / "a.txt").read_text() == "new"
    assert (checkouts.clone_count, checkouts.fetch_count) == (1, 2)


@pytest.mark.parametrize("protocol_version", [2, 0])
async def test_commit_only_on_pull_ref(origin: Path, tmp_path: Path,
                                       protocol_version: int) -> None:
    commit(origin, "main")
    git(origin, "checkout", "-q", "-b", "topic")
    pr_sha = commit(origin, "pr")
    git(origin, "update-ref", "refs/pull/7/head", commit(origin, "pr, pushed again"))
    git(origin, "checkout", "-q", "main")
    git(origin, "branch", "-q", "-D", "topic")
    checkouts = Checkouts(tmp_path / "work", protocol_version=protocol_version)
    async with checkouts.worktree(KEY, str(origin), pr_sha) as path:
        assert (path / "a.txt").read_text() == "pr"
    mirror = checkouts.workdir / "mirrors" / "octo__demo.git"
    pull_refs = git(mirror, "for-each-ref", "refs/pull")
    if protocol_version == 2:  # v2 hands out any sha it has: one fetch, no PR refs
        assert (checkouts.fetch_count, pull_refs) == (1, "")
    else:  # v0 refuses a sha that is no ref's tip: the fallback fetched the PR refs
        assert checkouts.fetch_count == 2 and "refs/pull/7/head" in pull_refs


@pytest.mark.parametrize("kept", [["commit"], ["commit", "tree"]], ids=["no-tree", "no-blob"])
async def test_a_commit_left_incomplete_by_a_killed_fetch_is_fetched_again(
        origin: Path, checkouts: Checkouts, kept: list[str]) -> None:
    """Field case (CI): a superseded run was cancelled while ``git fetch`` unpacked its
    objects; the mirror kept the commit without its tree, and the next run of that commit
    failed with "fatal: unable to read tree" on every try."""
    async with checkouts.worktree(KEY, str(origin), commit(origin, "old")):
        pass
    new = commit(origin, "new")
    mirror = checkouts.workdir / "mirrors" / "octo__demo.git"
    for kind, name in zip(["commit", "tree"], [new, f"{new}^{{tree}}"], strict=True):
        if kind in kept:  # what the killed fetch had written: loose objects, commit first
            body = subprocess.run(["git", "cat-file", kind, name], cwd=origin, check=True,
                                  capture_output=True).stdout
            subprocess.run(["git", "hash-object", "-w", "-t", kind, "--stdin"], cwd=mirror,
                           input=body, check=True, capture_output=True)
    git(mirror, "cat-file", "-e", f"{new}^{{commit}}")  # the commit alone looks present
    async with checkouts.worktree(KEY, str(origin), new) as path:
        assert (path / "a.txt").read_text() == "new"
    assert (checkouts.clone_count, checkouts.fetch_count) == (1, 2)


async def test_ref_locks_left_by_a_killed_fetch_do_not_block_the_next_one(
        origin: Path, checkouts: Checkouts) -> None:
    """A SIGKILLed ``git fetch`` (a cancelled run) keeps its ref locks; git then refused every
    later fetch: "cannot lock ref 'refs/heads/main': ... File exists"."""
    async with checkouts.worktree(KEY, str(origin), commit(origin, "old")):
        pass
    mirror = checkouts.workdir / "mirrors" / "octo__demo.git"
    for lock in ("refs/heads/main.lock", "packed-refs.lock", "objects/maintenance.lock"):
        (mirror / lock).write_text("")
    git(mirror, "repack", "-q")  # a fetch large enough to keep its pack, then killed
    (pack,) = (mirror / "objects" / "pack").glob("pack-*.pack")
    pack.with_suffix(".keep").write_text("fetch-pack 4242 on worker-1\n")  # stops its repack
    new = commit(origin, "new")
    async with checkouts.worktree(KEY, str(origin), new) as path:
        assert (path / "a.txt").read_text() == "new"
    assert git(mirror, "rev-parse", "refs/heads/main") == new
    assert sorted(mirror.rglob("*.lock")) == [] and sorted(mirror.rglob("*.keep")) == []


@pytest.mark.parametrize("folder_left", [False, True], ids=["folder-removed", "folder-left"])
async def test_a_worktree_add_killed_half_way_does_not_break_the_mirror(
        origin: Path, checkouts: Checkouts, folder_left: bool) -> None:
    """Field case (a tester cancelling runs at random): ``git worktree add`` killed right after
    it wrote its entry (null HEAD, ``locked`` "initializing") made every later fetch and
    ``--all`` walk fail "bad object worktrees/<id>/HEAD", for every commit, for good."""
    async with checkouts.worktree(KEY, str(origin), commit(origin, "old")):
        pass
    mirror = checkouts.workdir / "mirrors" / "octo__demo.git"
    folder = checkouts.workdir / "worktrees" / "octo__demo-0123456789ab-k1lled_x"  # mkdtemp's
    if folder_left:  # the worker itself was killed: nobody removed the half-made folder
        folder.mkdir()
        (folder / ".git").write_text(f"gitdir: {mirror / 'worktrees' / 'killed'}\n")
    entry = mirror / "worktrees" / "killed"
    entry.mkdir(parents=True)
    for name, text in {"HEAD": "0" * 40, "locked": "initializing", "commondir": "../..",
                       "gitdir": f"{folder / '.git'}"}.items():
        (entry / name).write_text(text + "\n")
    new = commit(origin, "new")
    async with checkouts.worktree(KEY, str(origin), new) as path:
        assert (path / "a.txt").read_text() == "new"
        assert len(worktree_list(mirror)) == 2  # the mirror and this one
    assert not entry.exists() and not folder.exists()
    assert await checkouts.changed_files(KEY, str(origin), new, new) == []


async def test_a_gc_keeps_commits_no_ref_reaches_packed_not_loose(
        origin: Path, checkouts: Checkouts) -> None:
    """A stress tester force-pushed and deleted branches: gc wrote the commits no ref reached
    any more out as loose objects (247,000 files, 1.1 GB), which kept automatic gc busy."""
    commit(origin, "main")
    git(origin, "checkout", "-q", "--orphan", "gone")
    for i in range(150):
        (origin / f"f{i}.txt").write_text(f"file {i}")
    git(origin, "add", ".")
    git(origin, "commit", "-q", "-m", "a branch deleted later")
    async with checkouts.worktree(KEY, str(origin), git(origin, "rev-parse", "HEAD")):
        pass
    mirror = checkouts.workdir / "mirrors" / "octo__demo.git"
    git(mirror, "update-ref", "-d", "refs/heads/gone")
    git(mirror, "gc", "--quiet")  # as automatic gc inside a fetch runs it, with our config
    counts = dict(line.split(": ") for line in git(mirror, "count-objects", "-v").splitlines())
    assert counts["count"] == "0" and int(counts["in-pack"]) > 150


async def test_a_worktree_whose_removal_was_cancelled_is_removed_by_the_next_fetch(
        origin: Path, tmp_path: Path) -> None:
    """Field case (a stress tester): a run cancelled while it waited for the mirror's lock to
    remove its worktree left the whole checkout (3,065 files) and its entry for good."""
    old, new = commit(origin, "old"), commit(origin, "new")
    checkouts = Checkouts(tmp_path / "work")
    mirror = checkouts.workdir / "mirrors" / "octo__demo.git"
    entered, leave = asyncio.Event(), asyncio.Event()
    paths: list[Path] = []

    async def run() -> None:
        async with checkouts.worktree(KEY, str(origin), old) as path:
            paths.append(path)
            entered.set()
            await leave.wait()

    task = asyncio.create_task(run())
    await entered.wait()
    fd = os.open(mirror.with_suffix(".lock"), os.O_RDWR)  # another worker is fetching
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        leave.set()
        await asyncio.sleep(0.2)  # the run waits for the lock to remove its worktree
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        os.close(fd)
    assert paths[0].is_dir() and len(worktree_list(mirror)) == 2  # left behind
    async with Checkouts(tmp_path / "work").worktree(KEY, str(origin), new) as path:
        assert not paths[0].exists()
        assert worktree_list(mirror) == [f"worktree {mirror}", f"worktree {path}"]


async def test_a_worktree_another_worker_is_using_is_never_removed(
        origin: Path, tmp_path: Path) -> None:
    old, new = commit(origin, "old"), commit(origin, "new")
    first, second = Checkouts(tmp_path / "work"), Checkouts(tmp_path / "work")
    async with first.worktree(KEY, str(origin), old) as using:
        async with second.worktree(KEY, str(origin), new):
            pass
        assert (using / "a.txt").read_text() == "old"
        assert git(using, "rev-parse", "HEAD") == old


READ_ONLY_RUN = """
import asyncio, subprocess, sys
from pathlib import Path
from worker.checkout import Checkouts

async def main(base: Path) -> None:
    origin = base / "origin"
    origin.mkdir()
    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@example.com",
                               *args], cwd=origin, check=True, capture_output=True,
                              text=True).stdout.strip()
    git("init", "-q", "-b", "main")
    (origin / "a.txt").write_text("x")
    git("add", ".")
    git("commit", "-q", "-m", "x")
    checkouts = Checkouts(base / "work")
    async with checkouts.worktree("octo/demo", str(origin), git("rev-parse", "HEAD")) as path:
        deep = path / "ro" / "deep"
        deep.mkdir(parents=True)
        (deep / "f").write_text("x")
        deep.chmod(0o555)
        (path / "ro").chmod(0o555)
    print(sorted(p.name for p in (base / "work" / "worktrees").iterdir()))

asyncio.run(main(Path(sys.argv[1])))
"""


def test_a_worktree_with_read_only_folders_is_removed(tmp_path: Path) -> None:
    """Field case (a stress tester, as a non-root worker like the Docker image's): a run left
    ``chmod 555`` folders (as Go's module cache does); ``git worktree remove`` and rmtree
    failed without a word and the folder stayed for good. Root unlinks anyway, so as root
    this runs as user nobody (setpriv), with the system Python (checkout is stdlib only)."""
    root = Path(__file__).parents[2]
    argv = [sys.executable]
    base = tmp_path
    if os.geteuid() == 0:
        python, setpriv = shutil.which("python3", path="/usr/bin"), shutil.which("setpriv")
        if python is None or setpriv is None:
            pytest.skip("running as root, and no setpriv or /usr/bin/python3 to drop it")
        if any(not os.stat(p).st_mode & 0o005 for p in [root, *root.parents]):
            pytest.skip(f"running as root, and user nobody cannot read {root}")
        argv = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", python]
        base = Path(tempfile.mkdtemp(prefix="llmgate-ro-", dir="/tmp"))
        base.chmod(0o777)
    try:
        done = subprocess.run([*argv, "-c", READ_ONLY_RUN, str(base)], capture_output=True,
                              text=True, timeout=60, cwd=base,
                              env={"PATH": os.environ["PATH"], "HOME": str(base),
                                   "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"})
    finally:
        if base != tmp_path:
            subprocess.run(["chmod", "-R", "u+rwx", str(base)], check=False)
            shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]\n"  # no worktree folder left


async def test_unknown_sha_is_a_git_error(origin: Path, checkouts: Checkouts) -> None:
    commit(origin, "x")
    with pytest.raises(GitError, match="not found"):
        async with checkouts.worktree(KEY, str(origin), "0123456789" * 4):
            pass
    assert list((checkouts.workdir / "worktrees").iterdir()) == []


async def test_removed_after_exception_inside(origin: Path, checkouts: Checkouts) -> None:
    sha = commit(origin, "x")
    with pytest.raises(RuntimeError, match="boom"):
        async with checkouts.worktree(KEY, str(origin), sha) as path:
            (path / "untracked.out").write_text("eval output")
            raise RuntimeError("boom")
    assert not path.exists()
    assert len(worktree_list(checkouts.workdir / "mirrors" / "octo__demo.git")) == 1


async def test_concurrent_calls_share_one_mirror(origin: Path, tmp_path: Path) -> None:
    shas = [commit(origin, str(i)) for i in range(3)]
    one, other = Checkouts(tmp_path / "work"), Checkouts(tmp_path / "work")  # two "processes"

    async def read(checkouts: Checkouts, sha: str) -> str:
        async with checkouts.worktree(KEY, str(origin), sha) as path:
            await asyncio.sleep(0.05)
            return (path / "a.txt").read_text()

    texts = await asyncio.gather(read(one, shas[0]), read(one, shas[2]), read(other, shas[1]))
    assert list(texts) == ["0", "2", "1"]
    assert one.clone_count + other.clone_count == 1
    assert one.fetch_count + other.fetch_count == 1


async def test_hooks_in_mirror_do_not_run(origin: Path, checkouts: Checkouts,
                                          tmp_path: Path) -> None:
    sha = commit(origin, "x")
    async with checkouts.worktree(KEY, str(origin), sha):
        pass
    marker = tmp_path / "hook-ran"
    hook = checkouts.workdir / "mirrors" / "octo__demo.git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    async with checkouts.worktree(KEY, str(origin), sha) as path:
        assert (path / "a.txt").exists()
    assert not marker.exists()


async def test_config_planted_through_a_worktree_is_undone(origin: Path,
                                                             checkouts: Checkouts) -> None:
    async with checkouts.worktree(KEY, str(origin), commit(origin, "pr")) as path:
        # what an untrusted eval could do: its .git points at the shared mirror
        git(path, "config", f"url.http://127.0.0.1:{free_port()}/.insteadOf", str(origin))
    new = commit(origin, "next")
    async with checkouts.worktree(KEY, str(origin), new) as path:
        assert (path / "a.txt").read_text() == "next"  # fetched from the real origin
    assert "insteadof" not in (checkouts.workdir / "mirrors/octo__demo.git/config").read_text()


async def test_merge_base(origin: Path, checkouts: Checkouts) -> None:
    fork_point = commit(origin, "fork")
    main_tip = commit(origin, "main")
    git(origin, "checkout", "-q", "-b", "topic", fork_point)
    topic_tip = commit(origin, "topic")
    assert await checkouts.merge_base(KEY, str(origin), main_tip, topic_tip) == fork_point


@pytest.mark.parametrize("sha", ["", "abc123", "HEAD", "-" + "a" * 39, "a" * 39, "g" * 40,
                                 "--upload-pack=touch /tmp/x", "a" * 41])
async def test_bad_sha_is_refused(checkouts: Checkouts, origin: Path, sha: str) -> None:
    with pytest.raises(ValueError, match="sha"):
        async with checkouts.worktree(KEY, str(origin), sha):
            pass
    assert not (checkouts.workdir / "mirrors").exists()  # refused before touching disk


@pytest.mark.parametrize("url", ["-uhttp://x", "--upload-pack=id", "ext::sh -c id",
                                 "ssh://git@host/x.git", "relative/path",
                                 "https://user:pw@github.com/o/r.git", "https:///nohost",
                                 "/path/with\nnewline"])
async def test_bad_clone_url_is_refused(checkouts: Checkouts, url: str) -> None:
    with pytest.raises(ValueError, match="URL"):
        async with checkouts.worktree(KEY, url, "a" * 40):
            pass


@pytest.mark.parametrize("key", ["octo", "../x", "octo/..", "a__b/c", "_a/b", "a/b/c", "-a/b"])
async def test_bad_repo_key_is_refused(checkouts: Checkouts, origin: Path, key: str) -> None:
    with pytest.raises(ValueError, match="repo_key"):
        async with checkouts.worktree(key, str(origin), "a" * 40):
            pass


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Records the Authorization header of each request and answers 404."""

    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.seen.append(self.headers.get("Authorization", ""))
        self.send_error(404)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def http_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Recorder.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}/octo/demo.git"
    server.shutdown()
    server.server_close()


def assert_token_nowhere(token: str, exc: GitError, workdir: Path) -> None:
    b64 = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    for text in (str(exc), " ".join(exc.command), exc.stderr, repr(exc.args)):
        assert token not in text and b64 not in text
    for path in workdir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert token.encode() not in data and b64.encode() not in data, path


async def test_token_is_sent_but_never_stored(http_url: str, checkouts: Checkouts) -> None:
    token = "ghs_" + os.urandom(12).hex()
    with pytest.raises(GitError) as caught:
        async with checkouts.worktree(KEY, http_url, "a" * 40, token=token):
            pass
    expected = "basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()
    assert _Recorder.seen and all(h.lower() == expected.lower() for h in _Recorder.seen)
    assert_token_nowhere(token, caught.value, checkouts.workdir)


async def test_closed_port_error_hides_token(checkouts: Checkouts) -> None:
    token = "ghs_" + os.urandom(12).hex()
    url = f"http://127.0.0.1:{free_port()}/x.git"
    with pytest.raises(GitError) as caught:
        async with checkouts.worktree(KEY, url, "b" * 40, token=token):
            pass
    assert "127.0.0.1" in str(caught.value)
    assert_token_nowhere(token, caught.value, checkouts.workdir)


async def test_local_worktree_and_resolve_ref(origin: Path, tmp_path: Path) -> None:
    first = commit(origin, "first")
    git(origin, "checkout", "-q", "-b", "feature")
    commit(origin, "feature")
    git(origin, "checkout", "-q", "main")
    marker = tmp_path / "hook-ran"
    hook = origin / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    assert await resolve_ref(origin, "feature~1") == first
    async with local_worktree(origin, "feature") as path:
        assert (path / "a.txt").read_text() == "feature"
        assert (origin / "a.txt").read_text() == "first"  # the user's checkout is untouched
        assert len(worktree_list(origin)) == 2
    assert not path.exists() and not path.parent.exists()
    assert len(worktree_list(origin)) == 1
    assert not marker.exists()


def test_a_worktree_left_registered_by_an_interrupt_is_forgotten(origin: Path,
                                                                tmp_path: Path) -> None:
    """CI of issue 32's stop: SIGTERM under load left a worktree registered in the user's
    repository. An interrupt during ``git worktree add`` leaves it locked ("initializing"), so
    ``git worktree prune`` keeps it; `forget_worktrees` drops what is under its parent only."""
    commit(origin, "x")
    parent, other = tmp_path / "llmgate-run", tmp_path / "elsewhere"
    for where in (parent / "wt-1", other / "wt-2"):
        git(origin, "worktree", "add", "-q", "--detach", str(where), "HEAD")
    git(origin, "worktree", "lock", "--reason", "initializing", str(parent / "wt-1"))
    shutil.rmtree(parent)
    git(origin, "worktree", "prune")
    assert len(worktree_list(origin)) == 3  # prune keeps the locked one
    forget_worktrees(origin, parent, os.environ)
    assert [Path(p).name for p in worktree_list(origin)] == [origin.name, "wt-2"]


async def test_resolve_ref_errors(origin: Path, tmp_path: Path) -> None:
    commit(origin, "x")
    with pytest.raises(ValueError):
        await resolve_ref(origin, "--output=/tmp/x")
    with pytest.raises(GitError, match="no-such-branch"):
        await resolve_ref(origin, "no-such-branch")
    with pytest.raises(GitError, match="not a git repository"):
        await resolve_ref(tmp_path, "HEAD")


async def test_hung_fetch_times_out_without_fallback(checkouts: Checkouts,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("worker.checkout.FETCH_TIMEOUT_S", 0.5)
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/x.git"
        with pytest.raises(GitError, match="timed out after 0.5 s") as caught:
            async with checkouts.worktree(KEY, url, "c" * 40, token="ghs_secret"):
                pass
    assert caught.value.timed_out and checkouts.fetch_count == 1
