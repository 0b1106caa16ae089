"""Issue 30, part 4: a late or repeated retarget delivery never leaves the old base newest.

"A PR retargeted main -> loose branch -> main whose middle ``edited`` delivery arrived last
ended with the loose branch's ``success`` as the newest ``llmgate`` check while the PR targets
``main``, still so 18 minutes later; the same when the last ``edited`` body was byte-identical
to an earlier one and the web process answered ``duplicate``."

Signed deliveries go through the real receiver (signature, routing, the enqueue script, the
arq queue in the test's Redis); an in-process arq worker runs the jobs against the
schema-checking fake GitHub, whose ``GET .../pulls/2`` answers as GitHub did at each moment,
and a real git repository where the head passes against ``loose`` (0.75 -> 0.75) and fails
against ``main`` (1.0 -> 0.75).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from arq.connections import ArqRedis, create_pool

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit.app_support import encode, fixture_json, post, running_app, settings
from tests.unit.events_support import COLLABORATORS, flag_target, run_burst
from tests.unit.runs_support import PRIVATE_PEM, PUBLIC_PEM
from tests.unit.worker_support import APP_ID, CONFIG, DATASET, ECHO, fake_github_env, git
from worker.gate.reconcile import reconcile
from worker.github.auth import AppCredentials, InstallationTokenCache
from worker.github.client import GitHubClient
from worker.main import worker_settings

pytestmark = pytest.mark.filterwarnings("ignore:Call to deprecated close:DeprecationWarning")

OWNER, NAME, NUMBER = "Codertocat", "Hello-World", 2  # the fixtures' pull request
INSTALLATION = 1  # the fixtures' installation
LEFT = "Superseded: the pull request's base changed to main."


@pytest.fixture()
def flags(tmp_path: Path) -> tuple[Path, Path]:
    """(the file the ``loose`` target waits for, the file it touches when it starts); the
    first exists: targets answer at once until a test removes it."""
    folder = tmp_path / "flags"
    folder.mkdir()
    (folder / "go").touch()
    return folder / "go", folder / "started"


def _commit(repo: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "change")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture()
def shas(tmp_path: Path, flags: tuple[Path, Path]) -> dict[str, str]:
    """``main`` (A): 4 of 4 pass; ``loose`` (B, child of A): ``bravo`` breaks (0.75), and its
    target waits for the flag; ``head`` (H, child of B): a README change. H fails against
    main and passes against loose; each base is an ancestor of H (its merge base)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    shas = {"main": _commit(repo, {".llmgate.yml": CONFIG, "echo.py": ECHO,
                                   "evals/echo.jsonl": DATASET})}
    waiting = flag_target(*flags).replace('BROKEN = ""', 'BROKEN = "bravo"')
    shas["loose"] = _commit(repo, {"echo.py": waiting})
    shas["head"] = _commit(repo, {"README.md": "An echo bot.\n"})
    git(repo, "branch", "-q", "loose", shas["loose"])
    git(repo, "reset", "-q", "--hard", shas["main"])
    return shas


@pytest.fixture()
def clone_url(tmp_path: Path) -> str:
    return (tmp_path / "repo").as_uri()


@pytest.fixture()
def github(monkeypatch: pytest.MonkeyPatch, redis_url: str, tmp_path: Path,
           flags: tuple[Path, Path]) -> Iterator[FakeGitHubServer]:
    """The fake GitHub (installation 1, the fixtures' author may write) and the worker's
    environment; targets may read and write the flags' folder."""
    folder = str(flags[0].parent)
    with fake_github_env(monkeypatch, redis_url, tmp_path / "work", keys=(PRIVATE_PEM, PUBLIC_PEM),
                         installations=(INSTALLATION,), collaborators=COLLABORATORS,
                         LLMGATE_SANDBOX_READ_PATHS=folder,
                         LLMGATE_SANDBOX_WRITE_PATHS=folder) as server:
        yield server


def _on(github: FakeGitHubServer, shas: dict[str, str], clone_url: str, base: str) -> None:
    """GitHub's API shows pull request #2 at the head, into ``base``."""
    github.setup({"pulls": [{"owner": OWNER, "repo": NAME, "number": NUMBER,
                             "head_sha": shas["head"], "base_sha": shas[base],
                             "base_ref": base, "head_ref": "feature", "clone_url": clone_url,
                             "author": "Codertocat"}]})


def _delivery(action: str, shas: dict[str, str], clone_url: str, base: str, second: int,
              moved_from: str = "") -> bytes:
    """A ``pull_request`` delivery of #2 at the head into ``base``, updated at 10:00:<second>;
    an ``edited`` one says the base changed from ``moved_from``."""
    data = fixture_json("pull_request.edited.DERIVED.json" if action == "edited"
                        else f"pull_request.{action}.json")
    pull = data["pull_request"]
    pull["head"]["sha"] = shas["head"]
    pull["base"]["ref"], pull["base"]["sha"] = base, shas[base]
    pull["updated_at"] = f"2026-11-30T10:00:{second:02d}Z"
    data["repository"]["clone_url"] = clone_url
    if action == "edited":
        data["changes"] = {"base": {"ref": {"from": moved_from},
                                    "sha": {"from": shas[moved_from]}}}
    return encode(data)


def _checks(github: FakeGitHubServer, shas: dict[str, str]) -> list[dict[str, Any]]:
    """The ``llmgate`` check runs on the head, oldest first (GitHub shows the last)."""
    return sorted((r for r in github.state()["check_runs"]
                   if r["name"] == "llmgate" and r["head_sha"] == shas["head"]),
                  key=lambda r: r["id"])


def _comment(github: FakeGitHubServer) -> dict[str, Any]:
    [comment] = [c for c in github.state()["comments"] if c["issue_number"] == NUMBER]
    return comment


def _gated_against_main(github: FakeGitHubServer, shas: dict[str, str]) -> None:
    """The newest ``llmgate`` check is main's verdict (fail: 1.0 -> 0.75), and so is the
    sticky comment."""
    newest = _checks(github, shas)[-1]
    assert (newest["status"], newest["conclusion"]) == ("completed", "failure")
    body = _comment(github)["body"]
    assert f"**base** `{shas['main'][:7]}`" in body and "llmgate: fail" in body
    assert github.state()["violations"] == []


async def _until(condition: Any, what: str, timeout_s: float = 60.0) -> None:
    try:
        async with asyncio.timeout(timeout_s):
            while not condition():
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"{what} within {timeout_s} s") from None


async def test_a_late_middle_retarget_never_publishes_the_left_bases_pass(
        github, shas, clone_url, flags, redis_url):
    """The field case: main -> loose (10:00:01) -> main (10:00:02), the middle ``edited``
    arriving last. Its run on ``loose`` asks GitHub whether it is wanted, and GitHub's API,
    a moment behind, still says ``loose``; by the time the run is ready to publish, GitHub
    says ``main``. The run asks again right before it writes (what GitHub said at its start
    does not count): it is cancelled instead of passing, and since its check run would be the
    newest, the head is gated against ``main`` once more."""
    flag, started = flags
    _on(github, shas, clone_url, "main")
    async with running_app(settings(redis_url)) as client:
        opened = await post(client, "pull_request", "f-0",
                            _delivery("opened", shas, clone_url, "main", 0))
        await run_burst()  # main: fails
        back = await post(client, "pull_request", "f-2",  # loose -> main
                          _delivery("edited", shas, clone_url, "main", 2, "loose"))
        await run_burst()
        late = await post(client, "pull_request", "f-1",  # main -> loose, arriving last
                          _delivery("edited", shas, clone_url, "loose", 1, "main"))
    assert [r.json()["status"] for r in (opened, back, late)] == ["queued"] * 3
    assert [r["conclusion"] for r in _checks(github, shas)] == ["failure", "failure"]

    _on(github, shas, clone_url, "loose")  # GitHub's API lags the second retarget
    flag.unlink()
    started.unlink()  # (the head's target, loose's, ran against main too)
    burst = asyncio.create_task(run_burst())
    await _until(started.exists, "the run on loose to start its target")
    _on(github, shas, clone_url, "main")  # ... and catches up
    flag.touch()
    await asyncio.wait_for(burst, 120)

    checks = _checks(github, shas)
    assert [r["conclusion"] for r in checks] == ["failure", "failure", "cancelled", "failure"]
    assert checks[2]["output"]["summary"] == LEFT  # loose's run: never a pass
    assert not [body for body in _comment(github)["history"] if "llmgate: pass" in body]
    _gated_against_main(github, shas)


async def test_a_byte_identical_retarget_body_is_taken_again(github, shas, clone_url,
                                                             redis_url):
    """main -> loose -> main -> loose -> main within one second: GitHub's third and fourth
    ``edited`` bodies are byte for byte the first and the second (one ``updated_at``). The
    runs of loose pass while GitHub shows loose, and the one of main is dropped then; the
    last retarget, back to main, must not be answered ``duplicate``. A body that would change
    nothing (the same retarget again) still is."""
    _on(github, shas, clone_url, "main")
    to_loose = _delivery("edited", shas, clone_url, "loose", 5, "main")
    to_main = _delivery("edited", shas, clone_url, "main", 5, "loose")
    async with running_app(settings(redis_url)) as client:
        answers = [await post(client, "pull_request", "d-0",
                              _delivery("opened", shas, clone_url, "main", 0))]
        await run_burst()  # main: fails
        _on(github, shas, clone_url, "loose")
        answers.append(await post(client, "pull_request", "d-1", to_loose))
        _on(github, shas, clone_url, "main")
        answers.append(await post(client, "pull_request", "d-2", to_main))
        _on(github, shas, clone_url, "loose")
        answers.append(await post(client, "pull_request", "d-3", to_loose))
        await run_burst()  # GitHub shows loose: loose passes, the run of main is dropped
        assert "success" in [r["conclusion"] for r in _checks(github, shas)]
        _on(github, shas, clone_url, "main")
        answers.append(await post(client, "pull_request", "d-4", to_main))
        await run_burst()
        again = await post(client, "pull_request", "d-5", to_main)  # changes nothing
    _gated_against_main(github, shas)
    assert [a.json()["status"] for a in answers] == ["queued"] * 5
    assert again.json() == {"status": "duplicate"}


@pytest.fixture()
async def arq(redis_url: str) -> AsyncIterator[ArqRedis]:
    pool = await create_pool(worker_settings().redis_settings)
    yield pool
    await pool.aclose()


async def test_the_reconciler_regates_a_pull_request_on_a_base_its_newest_check_left(
        github, shas, clone_url, redis_url, arq):
    """#2 was opened into loose and passed; then it was retargeted to main and that
    ``edited`` delivery never came (lost). The newest ``llmgate`` check, loose's ``success``,
    would stand for good: the reconciler compares the base it was gated against with the one
    GitHub shows and gates the head against main. A second pass changes nothing."""
    _on(github, shas, clone_url, "loose")
    async with running_app(settings(redis_url)) as client:
        opened = await post(client, "pull_request", "r-0",
                            _delivery("opened", shas, clone_url, "loose", 0))
    assert opened.json() == {"status": "queued"}
    await run_burst()
    assert [r["conclusion"] for r in _checks(github, shas)] == ["success"]
    _on(github, shas, clone_url, "main")  # retargeted; its delivery is lost

    creds = AppCredentials(APP_ID, PRIVATE_PEM)
    async with httpx.AsyncClient(timeout=10) as session:
        gh = GitHubClient(session, github.url, creds, InstallationTokenCache(creds),
                          INSTALLATION, retry_delays_s=(0.01,))
        first = await reconcile(arq, gh, lambda _: gh, confirm_s=0)
        assert (first.queued, first.concluded, first.errors) == (1, 0, [])
        await run_burst()
        second = await reconcile(arq, gh, lambda _: gh, confirm_s=0)
    assert (second.queued, second.concluded, second.errors) == (0, 0, [])
    assert [r["conclusion"] for r in _checks(github, shas)] == ["success", "failure"]
    _gated_against_main(github, shas)
