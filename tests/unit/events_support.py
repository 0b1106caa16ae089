"""Helpers for the event job tests: the worker's environment, burst runs, a two-base repository.

- `worker_env`: a fresh schema-checking fake GitHub and the worker's environment pointing at it
  and at the test's Redis (App id 4242, installations 1 and 7, collaborators by role); the
  fixture `github` is its usual form (import it as ``github = events_support.github``).
- `run_burst`: enqueue jobs into the real arq queue and run an in-process burst worker until
  the queue is empty; return each job's result.
- `build_two_base_repo`: the field case's history, where one head has two different bases.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from arq import create_pool
from arq.jobs import Job
from arq.worker import create_worker

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit.worker_support import CONFIG, DATASET, ECHO, fake_github_env, git
from worker.main import worker_settings

#: Roles of the fake's collaborators.
COLLABORATORS = {"writer": "write", "reader": "read", "Codertocat": "write",
                 "maintainer": "maintain"}


@contextmanager
def worker_env(monkeypatch: pytest.MonkeyPatch, redis_url: str, workdir: Path,
               **extra_env: str) -> Iterator[FakeGitHubServer]:
    """Yield a fresh fake GitHub (installations 1 and 7, `COLLABORATORS`); the worker's
    environment points at it and at ``redis_url`` (see `fake_github_env`)."""
    with fake_github_env(monkeypatch, redis_url, workdir, installations=(1, 7),
                         collaborators=COLLABORATORS, **extra_env) as server:
        yield server


@pytest.fixture()
def github(monkeypatch: pytest.MonkeyPatch, redis_url: str,
           tmp_path: Path) -> Iterator[FakeGitHubServer]:
    """`worker_env` with ``tmp_path / "work"`` as the worker's working directory."""
    with worker_env(monkeypatch, redis_url, tmp_path / "work") as server:
        yield server


async def enqueue(jobs: Sequence[tuple[str, Any, str]]) -> None:
    """Put ``(function, payload, job_id)`` jobs in the real arq queue."""
    pool = await create_pool(worker_settings().redis_settings)
    try:
        for function, payload, job_id in jobs:
            assert await pool.enqueue_job(function, payload, _job_id=job_id) is not None, job_id
    finally:
        await pool.aclose()


async def results(job_ids: Sequence[str]) -> dict[str, Any]:
    """Return the stored result of each finished job (its exception if it raised)."""
    pool = await create_pool(worker_settings().redis_settings)
    try:
        out: dict[str, Any] = {}
        for job_id in job_ids:
            info = await Job(job_id, pool).result_info()
            assert info is not None, f"job {job_id} has no result"
            out[job_id] = info.result
        return out
    finally:
        await pool.aclose()


async def run_burst(jobs: Sequence[tuple[str, Any, str]] = ()) -> dict[str, Any]:
    """Enqueue ``jobs``, run a burst worker until the queue is empty; return their results."""
    await enqueue(jobs)
    worker = create_worker(worker_settings(), burst=True, poll_delay=0.05,
                           handle_signals=False, cron_jobs=[])
    try:
        await worker.async_run()
    finally:
        await worker.close()
    return await results([job_id for _, _, job_id in jobs])


def _commit(repo: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "change")
    return git(repo, "rev-parse", "HEAD")


def build_two_base_repo(dest: Path) -> dict[str, str]:
    """Create the field case's repository at ``dest``; return name -> commit SHA.

    - ``main`` (A): the echo suite, 4 of 4 pass (1.0);
    - ``release`` (B, child of A): ``bravo`` breaks, 3 of 4 (0.75);
    - ``head`` (H, child of B): a README change, still 0.75.

    Against ``main`` H fails ``max_drop 0.05`` (1.0 -> 0.75); against ``release`` it passes
    (0.75 -> 0.75). Each base is an ancestor of H, so it is also the merge base.
    """
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    shas = {"main": _commit(dest, {".llmgate.yml": CONFIG, "echo.py": ECHO,
                                   "evals/echo.jsonl": DATASET})}
    shas["release"] = _commit(dest, {"echo.py": ECHO.replace('BROKEN = ""', 'BROKEN = "bravo"')})
    shas["head"] = _commit(dest, {"README.md": "An echo bot.\n"})
    git(dest, "branch", "-q", "release", shas["release"])
    git(dest, "reset", "-q", "--hard", shas["main"])
    return shas


def flag_target(flag: Path, started: Path) -> str:
    """An echo target that touches ``started`` and then waits (up to 30 s) for ``flag``."""
    return ECHO.replace("import json, sys", "import json, os, pathlib, sys, time\n"
                        f"pathlib.Path({str(started)!r}).touch()\n"
                        "deadline = time.time() + 30\n"
                        f"while not os.path.exists({str(flag)!r}) and time.time() < deadline:\n"
                        "    time.sleep(0.05)")


def only(items: list[Any], **match: Any) -> Any:
    """Return the one item of ``items`` whose fields equal ``match``."""
    found = [i for i in items if all(i.get(k) == v for k, v in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


__all__ = ["COLLABORATORS", "build_two_base_repo", "enqueue", "flag_target", "github", "only",
           "results", "run_burst", "worker_env"]
