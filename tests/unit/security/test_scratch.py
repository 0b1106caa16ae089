"""Scratch folders named after their owner, and the removal of dead owners' (issue 32).

Real processes: a child that makes a folder and exits is a dead owner; this test process is
a live one."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from worker.security import scratch
from worker.security.sandbox_procs import start_ticks

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture()
def tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _made_by_a_process_that_ended(tmp: Path, prefix: str) -> Path:
    code = f"from worker.security import scratch; print(scratch.make({prefix!r}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={**os.environ, "TMPDIR": str(tmp)})
    return Path(out.stdout.strip())


def test_a_folder_is_named_after_its_live_owner(tmp: Path) -> None:
    folder = scratch.make(scratch.TARGET_PREFIX)
    assert folder.parent == tmp and folder.stat().st_mode & 0o777 == 0o700
    owner = scratch.owner_of(folder.name)
    assert owner is not None and (owner.pid, owner.start) == (os.getpid(),
                                                             start_ticks(os.getpid()))
    assert scratch.owner_alive(owner)


def test_dead_owners_folders_go_and_every_other_stays(tmp: Path) -> None:
    dead = [_made_by_a_process_that_ended(tmp, p) for p in scratch.PREFIXES]
    (dead[0] / "input.json").write_text("{}")
    (dead[1] / "repo" / "ro").mkdir(parents=True)
    (dead[1] / "repo" / "ro").chmod(0o500)  # a target's read-only folder
    live = [scratch.make(p) for p in scratch.PREFIXES]
    me, ns = os.getpid(), scratch.owner_tag().split("-")[2]
    elsewhere = tmp / f"llmgate-target-{me}-1-{int(ns) + 1}-abc"  # another PID namespace
    reused = tmp / f"llmgate-view-{me}-{(start_ticks(me) or 0) + 1}-{ns}-abc"  # my pid, not me
    unknown = tmp / "llmgate-target-abcd1234"  # an older llmgate's: no owner named
    for folder in (elsewhere, reused, unknown):
        folder.mkdir()
    precious = tmp / "precious"
    precious.mkdir()
    link = tmp / dead[0].name.replace("-target-", "-view-")  # a dead owner's name, a symlink
    link.symlink_to(precious)
    removed = scratch.remove_stale()
    assert sorted(removed) == sorted([*dead, reused])
    left = sorted(p.name for p in tmp.iterdir())
    assert left == sorted([*(p.name for p in live), elsewhere.name, unknown.name,
                           "precious", link.name]), left
    assert precious.is_dir() and link.is_symlink()  # never followed, never removed


def test_only_the_prefixes_asked_for_are_removed(tmp: Path) -> None:
    target, view = (_made_by_a_process_that_ended(tmp, p) for p in scratch.PREFIXES)
    assert scratch.remove_stale((scratch.VIEW_PREFIX,)) == [view]
    assert target.is_dir()
