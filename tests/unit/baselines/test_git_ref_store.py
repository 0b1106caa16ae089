"""The git store (worker/baselines/local.py `GitRefStore`) in a real repository: a batch is one
commit listing its records, and a writer that moves the ref meanwhile (a concurrent push) loses
nothing: the commit is rebuilt on the new tip, never written over it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.unit.baselines.test_baseline_serialize import rich_result
from tests.unit.worker_support import git
from worker.baselines.keys import BaselineKey
from worker.baselines.local import DEFAULT_REF, GitRefStore
from worker.baselines.store import Baseline
from worker.checkout import local_git

pytestmark = pytest.mark.slow  # git processes
SHA = "a" * 40


def baseline(suite: str, repo: str = "acme/bot") -> Baseline:
    return Baseline(repo, SHA, BaselineKey(suite, "c" * 64, "d" * 64, "f" * 64), rich_result(),
                    "push", "main", 0, 1000.0)


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    return root


def commits(repo: Path) -> list[str]:
    """The subjects of the ref's commits, newest first."""
    return git(repo, "log", "--format=%s", DEFAULT_REF).splitlines()


def files(repo: Path) -> list[str]:
    return git(repo, "ls-tree", "-r", "--name-only", DEFAULT_REF).splitlines()


class Rival:
    """Runs git for a store and, before each of its first ``times`` ``update-ref`` calls,
    lets another real store commit a record under the same ref: the ref moves between the
    store's read of the tip and its update, as with a push running at the same time."""

    def __init__(self, repo: Path, times: int) -> None:
        self.other = GitRefStore(repo)
        self.times = times
        self.moved = 0

    async def __call__(self, repo_dir: Path, *args: str,
                       env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
        if args[0] == "update-ref" and self.moved < self.times:
            self.moved += 1
            assert await self.other.put(baseline(f"rival{self.moved}")) is None
        return await local_git(repo_dir, *args, env=env)


async def test_a_batch_is_one_commit_whose_message_lists_its_records(repo):
    store = GitRefStore(repo)
    store.start_batch()
    for suite, namespace in (("s", "acme/bot"), ("s", "acme/bot/services/a"), ("t", "acme/bot")):
        assert await store.put(baseline(suite, namespace)) is None
    assert await store.get("acme/bot/services/a", SHA, baseline("s").key) is not None  # held
    assert git(repo, "for-each-ref", "refs/llmgate/") == ""  # nothing written yet
    assert await store.commit_batch("llmgate baseline push of aaaa (main): 3 suites") is None
    assert git(repo, "log", "--format=%B", DEFAULT_REF).splitlines() == [
        "llmgate baseline push of aaaa (main): 3 suites", "",
        f"acme/bot: s at {SHA[:12]}", f"acme/bot/services/a: s at {SHA[:12]}",
        f"acme/bot: t at {SHA[:12]}"]
    assert len(files(repo)) == 3
    fresh = GitRefStore(repo)  # read back from the ref, not from the batch
    found = await fresh.get("acme/bot/services/a", SHA, baseline("s").key)
    assert found is not None and found.result == rich_result()

    store.start_batch()
    assert await store.commit_batch("nothing held") is None
    assert len(commits(repo)) == 1  # an empty batch makes no commit


@pytest.mark.parametrize("existing", [False, True], ids=["new ref", "existing ref"])
async def test_a_ref_moved_meanwhile_is_built_on_not_overwritten(repo, existing):
    if existing:
        assert await GitRefStore(repo).put(baseline("first")) is None
    rival = Rival(repo, times=1)
    store = GitRefStore(repo, git=rival)
    store.start_batch()
    assert await store.put(baseline("s")) is None
    assert await store.commit_batch("ours") is None
    assert rival.moved == 1
    assert commits(repo) == ["ours", f"llmgate baseline rival1 at {SHA[:12]}",
                             *([f"llmgate baseline first at {SHA[:12]}"] if existing else [])]
    reader = GitRefStore(repo)
    for suite in ("s", "rival1", *(["first"] if existing else [])):
        assert await reader.get("acme/bot", SHA, baseline(suite).key) is not None, suite


async def test_a_ref_that_keeps_moving_is_given_up_after_max_tries(repo):
    rival = Rival(repo, times=GitRefStore.MAX_TRIES)
    store = GitRefStore(repo, git=rival)
    why = await store.put(baseline("s"))
    assert why is not None and f"moved {GitRefStore.MAX_TRIES} times" in why
    assert await GitRefStore(repo).get("acme/bot", SHA, baseline("s").key) is None
    assert len(commits(repo)) == GitRefStore.MAX_TRIES  # every rival's record kept


async def test_a_failure_that_is_not_a_race_is_reported_at_once(repo):
    store = GitRefStore(repo)
    assert await store.put(baseline("first")) is None
    lock = repo / ".git" / DEFAULT_REF
    lock = lock.with_name(lock.name + ".lock")
    lock.write_text("")  # another git holds the ref's lock
    why = await store.put(baseline("s"))
    assert why is not None and why.startswith("git update-ref failed") and ".lock" in why
    assert len(commits(repo)) == 1
