"""Tests of `worker.security.target_view`: the copy of a checkout a target runs in, without the
eval data that grades it (issue 30), and the Landlock rules a target gets in it."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from worker.evals.run.targets import run_command
from worker.evals.types import CommandTarget, Example, Settings
from worker.security import landlock, sandbox, target_view
from worker.security.sandbox import Limits, Policy, Sandbox
from worker.security.target_view import TargetView, build_view, remove_view, view_of

PYTHON = shlex.quote(sys.executable)
needs_landlock = pytest.mark.skipif(
    landlock.abi_version() < 1,
    reason="this kernel has no Landlock (Linux 5.13+ with landlock in lsm=): a target could "
           "open the original checkout by its path, which the gate then notes")
DATA = '{"id": "q1", "input": "2+2", "expected": "four, as the key says"}\n'


@pytest.fixture()
def use_sandbox() -> Iterator[list[Sandbox]]:
    """Let a test install its own sandbox; restore the previous one afterwards."""
    saved = list(sandbox._current)
    yield sandbox._current
    sandbox._current[:] = saved


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    """A checkout with git metadata, a dataset, links to it and files of the target's own."""
    root = tmp_path / "worktrees" / "checkout"
    (root / ".git" / "objects").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "evals").mkdir()
    (root / "evals" / "qa.jsonl").write_text(DATA)
    (root / "evals" / "notes.md").write_text("how the evals work\n")
    (root / "bot.py").write_text("print('hi')\n")
    (root / "bot.py").chmod(0o755)
    (root / "vendor" / "lib").mkdir(parents=True)
    (root / "vendor" / "lib" / ".git").write_text("gitdir: ../../.git/modules/lib\n")
    (root / "vendor" / "lib" / "code.py").write_text("X = 1\n")
    (root / "answers.jsonl").symlink_to("evals/qa.jsonl")  # a link to the data: dangles
    os.link(root / "evals" / "qa.jsonl", root / "copy.jsonl")  # a hard link: left out
    (root / "fixtures").mkdir()
    (root / "fixtures" / "key.jsonl").write_text(DATA)
    (root / "evals" / "traps.jsonl").symlink_to("../fixtures/key.jsonl")  # hidden: both go
    os.mkfifo(root / "pipe")
    return root


@pytest.fixture()
def view(checkout: Path) -> Iterator[TargetView]:
    built = build_view(checkout, ["evals/qa.jsonl", "./evals/traps.jsonl", "missing.jsonl",
                                  "../outside.jsonl", ".llmgate.yml"])
    yield built
    remove_view(built)


def tree(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def test_the_view_has_no_git_metadata_and_no_hidden_file(checkout: Path,
                                                         view: TargetView) -> None:
    assert tree(view.root) == ["answers.jsonl", "bot.py", "evals", "evals/notes.md", "fixtures",
                               "vendor", "vendor/lib", "vendor/lib/code.py"]
    assert view.root.name == "checkout" and view.root.parent.name.startswith("llmgate-view-")
    assert not view.root.is_relative_to(checkout.parent)
    assert view.hidden == ("evals/qa.jsonl", "evals/traps.jsonl", "fixtures/key.jsonl")
    assert os.readlink(view.root / "answers.jsonl") == "evals/qa.jsonl"  # copied as a link
    assert not (view.root / "answers.jsonl").exists()
    assert (view.root / "bot.py").read_text() == "print('hi')\n"
    assert stat.S_IMODE((view.root / "bot.py").stat().st_mode) == 0o755
    assert (view.root / "bot.py").stat().st_ino != (checkout / "bot.py").stat().st_ino
    assert view.denied[0] == checkout.resolve()
    assert checkout.resolve() / "evals" / "qa.jsonl" in view.denied
    assert view_of(view.root) == view and view_of(checkout) is None


def test_removing_a_view_leaves_the_checkout(checkout: Path, view: TargetView) -> None:
    (view.root / "made-by-target").write_text("x")
    (view.root / "bot.py").write_text("changed")
    remove_view(view)
    assert not view.root.parent.exists() and view_of(view.root) is None
    assert (checkout / "bot.py").read_text() == "print('hi')\n"
    assert not (checkout / "made-by-target").exists()
    assert (checkout / "evals" / "qa.jsonl").read_text() == DATA


def test_what_git_ignores_is_linked_unless_it_holds_eval_data(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "tool").write_text("#!/bin/sh\n")
    (root / "data").mkdir()
    (root / "data" / "eval.jsonl").write_text(DATA)
    (root / "data" / "weights.bin").write_bytes(b"\0" * 10)
    (root / "data" / "cache").mkdir()
    (root / ".env").write_text("A=1\n")
    (root / "app.py").write_text("")
    built = build_view(root, ["data/eval.jsonl"], [".venv/", "data/", ".env"])
    try:
        assert tree(built.root) == [".env", ".venv", "app.py", "data", "data/cache",
                                    "data/weights.bin"]
        assert os.readlink(built.root / ".venv") == str(root / ".venv")
        assert (built.root / ".venv" / "bin" / "tool").read_text() == "#!/bin/sh\n"
        assert not (built.root / "data").is_symlink()  # it holds the dataset: copied
        assert (built.root / "data" / "weights.bin").is_symlink()
        assert not (built.root / "app.py").is_symlink()
        assert set(built.linked) == {root / ".venv", root / ".env", root / "data" / "cache",
                                     root / "data" / "weights.bin"}
    finally:
        remove_view(built)


def test_a_view_that_cannot_be_built_leaves_nothing(checkout: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def full(src: str, dst: Path, *, clone: bool) -> bool:
        raise OSError(28, "No space left on device")

    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(target_view, "_copy_file", full)
    with pytest.raises(OSError, match="No space left"):
        build_view(checkout, [])
    assert list((tmp_path / "tmp").iterdir()) == []


@needs_landlock
async def test_a_target_in_a_view_cannot_reach_the_checkout_or_its_data(
        checkout: Path, view: TargetView, use_sandbox: list[Sandbox]) -> None:
    """The data is gone from the view, and Landlock refuses the original by any path: the
    checkout's absolute path, ``..``, or a sandbox read path that covers it."""
    policy = Policy.from_env({"PATH": os.environ["PATH"],
                              "LLMGATE_SANDBOX_READ_PATHS": f"{checkout.parent}:{checkout}/evals"})
    use_sandbox[:] = [Sandbox(Limits(), policy)]
    data = checkout / "evals" / "qa.jsonl"
    (view.root / "probe.py").write_text(f"""
import json, os, subprocess, sys
result = {{}}
def attempt(name, fn):
    try:
        result[name] = fn()
    except OSError as exc:
        result[name] = type(exc).__name__
def read(path):
    with open(path) as f:
        return f.read()[:5]
attempt('in_view', lambda: read('evals/qa.jsonl'))
attempt('own_file', lambda: read('evals/notes.md'))
attempt('absolute', lambda: read({str(data)!r}))
attempt('through_parent', lambda: read('../checkout/evals/qa.jsonl'))
attempt('checkout_listing', lambda: len(os.listdir({str(checkout)!r})))
attempt('view_parent', lambda: os.listdir('..'))
attempt('git', lambda: subprocess.run(['git', 'show', 'HEAD:evals/qa.jsonl'],
                                      capture_output=True).returncode)
attempt('write_checkout', lambda: open({str(checkout / "planted")!r}, 'w').write('x'))
attempt('write_view', lambda: open('made-here', 'w').write('ok'))
json.dump({{'output': result}}, open(sys.argv[2], 'w'))
""")
    target = CommandTarget(f"{PYTHON} probe.py {{input_file}} {{output_file}}")
    out = await run_command(target, Example("1", 1, "x"), view.root, Settings(timeout_s=30))
    assert out.error is None, out.error
    assert out.output == {
        "in_view": "FileNotFoundError", "own_file": "how t", "absolute": "PermissionError",
        "through_parent": "FileNotFoundError", "checkout_listing": "PermissionError",
        "view_parent": "PermissionError", "git": 128, "write_checkout": "PermissionError",
        "write_view": 2}
    assert not (checkout / "planted").exists()


@needs_landlock
async def test_a_linked_entry_is_granted_and_its_checkout_is_not(
        tmp_path: Path, use_sandbox: list[Sandbox]) -> None:
    root = tmp_path / "work" / "repo"
    (root / "cache").mkdir(parents=True)
    (root / "cache" / "model.txt").write_text("weights")
    (root / "data.jsonl").write_text(DATA)
    (root / "probe.py").write_text("""
import json, sys
result = {'model': open('cache/model.txt').read()}
open('cache/written', 'w').write('ok')
try:
    open('cache/../data.jsonl').read()
    result['escape'] = 'LEAK'
except OSError as exc:
    result['escape'] = type(exc).__name__
json.dump({'output': result}, open(sys.argv[2], 'w'))
""")
    use_sandbox[:] = [Sandbox(Limits(), Policy.from_env({"PATH": os.environ["PATH"]}))]
    built = build_view(root, ["data.jsonl"], ["cache/"])
    try:
        target = CommandTarget(f"{PYTHON} probe.py {{input_file}} {{output_file}}")
        out = await run_command(target, Example("1", 1, "x"), built.root, Settings(timeout_s=30))
    finally:
        remove_view(built)
    assert out.error is None, out.error
    # cache/.. is the original repository (the kernel follows the link): refused
    assert out.output == {"model": "weights", "escape": "PermissionError"}
    assert (root / "cache" / "written").read_text() == "ok"


async def test_a_target_that_fails_on_a_hidden_file_is_told_why(view: TargetView) -> None:
    (view.root / "bot.py").write_text("print(open('evals/qa.jsonl').read())\n")
    target = CommandTarget(f"{PYTHON} bot.py {{input_file}} {{output_file}}")
    out = await run_command(target, Example("1", 1, "x"), view.root, Settings(timeout_s=30))
    assert out.error is not None
    assert out.error.startswith("the command exited with status 1 (it names evals/qa.jsonl: "
                                "eval data that grades targets, which llmgate leaves out of the "
                                "copy of the checkout they run in; see docs/security-model.md)")
    assert "FileNotFoundError" in out.error


def test_views_of_processes_that_are_gone_are_removed(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    for name in (f"{gone}-abc", f"{os.getpid()}-def", "other"):
        (tmp_path / "tmp" / f"llmgate-view-{name}" / "repo").mkdir(parents=True)
    assert target_view.remove_stale_views() == 1
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == [
        f"llmgate-view-{os.getpid()}-def", "llmgate-view-other"]
