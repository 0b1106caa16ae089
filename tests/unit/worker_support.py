"""Helpers for the worker and CLI tests: a tiny gated git repository, a git HTTP server, jobs.

- `build_tiny_repo`: a real git repository with a four-example suite and branches whose gate
  outcomes are known exactly (see its docstring).
- `GitHttpServer`: serves bare repositories over git's "dumb" HTTP protocol on 127.0.0.1 and
  records every ``Authorization`` header, so a test can prove the token reached git's server.
- `gate_payload`: a `worker.contract.GatePayload` for a job enqueued straight into arq.
- `write_tickets_tree`: a tree whose one suite ``tickets`` runs a given ``bot.py`` command target.
- `fake_github_env`: a fresh schema-checking fake GitHub, with the worker's environment pointing
  at it and at the test's Redis; the fixture `github` is its usual form, and `tiny_repo` a
  module's copy of `build_tiny_repo` (import fixtures as ``github = worker_support.github``).
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from arq import create_pool
from arq.connections import ArqRedis
from arq.worker import Worker, create_worker

from tests.fakes.fake_github import FakeGitHubServer, generate_app_keypair, running_fake_github
from worker.contract import GatePayload, gate_job_id
from worker.main import worker_settings

APP_ID = "4242"
INSTALLATION_ID = 7
OWNER, REPO = "acme", "tiny"
#: The pull requests' author; test fakes give them write access, so their heads are trusted.
WRITER = "writer"

#: The target: echoes the input, except on branches that set BROKEN to a letter it then garbles.
ECHO = """import json, sys
BROKEN = ""
example = json.load(open(sys.argv[1]))
text = example["input"]
json.dump({"output": "nope" if BROKEN and BROKEN in text else text}, open(sys.argv[2], "w"))
"""
DATASET = "".join(json.dumps({"id": word, "input": word, "expected": word}) + "\n"
                  for word in ("alpha", "bravo", "charlie", "delta"))
CONFIG = """version: 1
settings:
  concurrency: 4
suites:
  - name: echo
    dataset: evals/echo.jsonl
    target:
      command: python3 echo.py {input_file} {output_file}
    assertions:
      - type: equals
    gate:
      pass_rate:
        min: 0.5
        max_drop: 0.05
"""
#: 1-based line of ``- type: equals`` in CONFIG (broken on ``pr/broken``).
ASSERTION_LINE = CONFIG.splitlines().index("      - type: equals") + 1


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` with a fixed identity, ignoring the user's and system config."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(repo), "LANG": "C",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    done = subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


def commit(repo: Path, branch: str, files: dict[str, str | None], message: str | None = None,
           start: str = "main") -> str:
    """Commit ``files`` (None deletes one) on ``branch`` (created from ``start``) with
    ``message`` (the branch's name when None); return the SHA; main is checked out afterwards."""
    if branch != "main":
        git(repo, "switch", "-q", "-C", branch, start)
    for name, text in files.items():
        path = repo / name
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", branch if message is None else message)
    sha = git(repo, "rev-parse", "HEAD")
    git(repo, "switch", "-q", "main")
    return sha


async def run_jobs(payloads: list[GatePayload], job_suffix: str = "") -> Worker:
    """Enqueue one gate job per payload and run a burst worker (settings from the environment,
    no cron jobs: the sweeper would count as a job) until the queue is empty.

    ``job_suffix`` gives the jobs fresh ids, as an ``edited`` delivery's (`gate_job_id`)."""
    settings = worker_settings()
    pool = await create_pool(settings.redis_settings)
    for p in payloads:
        await pool.enqueue_job("gate_pull_request", p, _job_id=gate_job_id(
            p["repo"], p["pr_number"], p["head_sha"], job_suffix))
    await pool.aclose()
    worker = create_worker(settings, burst=True, poll_delay=0.05, handle_signals=False,
                           cron_jobs=[])
    await worker.async_run()
    await worker.close()
    return worker


def build_tiny_repo(dest: Path) -> dict[str, str]:
    """Create a gated repository at ``dest``; return branch -> commit SHA.

    Branches (each one commit on ``main``; ``main`` is checked out and clean afterwards):

    - ``main``: 4 of 4 examples pass (pass rate 1.0);
    - ``pr/drop``: ``bravo`` breaks, 3 of 4 (0.75): passes ``min 0.5``, fails ``max_drop 0.05``;
    - ``pr/docs``: only a README change (1.0, passes);
    - ``pr/broken``: the assertion type is misspelt ``equalz`` at line `ASSERTION_LINE`;
    - ``pr/noconfig``: ``.llmgate.yml`` deleted.
    """
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    files: dict[str, str | None] = {".llmgate.yml": CONFIG, "echo.py": ECHO,
                                    "evals/echo.jsonl": DATASET}
    shas = {"main": commit(dest, "main", files, "echo bot")}
    branches: dict[str, dict[str, str | None]] = {
        "pr/drop": {"echo.py": ECHO.replace('BROKEN = ""', 'BROKEN = "bravo"')},
        "pr/docs": {"README.md": "An echo bot.\n"},
        "pr/broken": {".llmgate.yml": CONFIG.replace("type: equals", "type: equalz")},
        "pr/noconfig": {".llmgate.yml": None},
    }
    for branch, change in branches.items():
        shas[branch] = commit(dest, branch, change, branch)
    return shas


def write_tickets_tree(root: Path, rows: list[dict[str, Any]], bot: str, gate: str,
                       files: dict[str, str] | None = None) -> Path:
    """Write a tree at ``root`` (created with its parents) and return ``root``.

    Its suite ``tickets`` reads ``rows`` from ``evals/t.jsonl``, runs ``bot`` as ``bot.py`` with
    this Python (``{input_file} {output_file}``), asserts ``equals`` and is gated by ``gate``:
    the lines under ``gate:``, each indented six spaces and ending in a newline. ``files``: more
    files, path -> text.
    """
    (root / "evals").mkdir(parents=True)
    (root / "evals" / "t.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (root / "bot.py").write_text(bot)
    for name, text in (files or {}).items():
        (root / name).write_text(text)
    python = shlex.quote(sys.executable)
    (root / ".llmgate.yml").write_text(f"""\
version: 1
suites:
  - name: tickets
    dataset: evals/t.jsonl
    target: {{command: "{python} bot.py {{input_file}} {{output_file}}"}}
    assertions: [{{type: equals}}]
    gate:
{gate}""")
    return root


def clone_branches(source: Path, dest: Path, branches: Collection[str]) -> Path:
    """Clone ``source`` to ``dest`` with a local branch for each of ``branches`` (main is the
    clone's own); return ``dest``."""
    subprocess.run(["git", "clone", "-q", "--no-local", str(source), str(dest)], check=True)
    for branch in branches:
        if branch != "main":
            git(dest, "branch", "-q", branch, f"origin/{branch}")
    return dest


def publish_bare(repo: Path, root: Path, name: str) -> Path:
    """Copy ``repo`` as a bare repository ``root/name`` ready for dumb-HTTP fetches."""
    bare = root / name
    bare.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "-q", "--bare", "--no-local", str(repo), str(bare)],
                   check=True, capture_output=True)
    git(bare, "update-server-info")
    return bare


class GitHttpServer:
    """Serve a directory of bare repositories over git's dumb HTTP protocol on 127.0.0.1.

    Attributes:
        url: ``http://127.0.0.1:PORT``; a repository ``root/a/b.git`` is ``url + "/a/b.git"``.
        authorizations: every ``Authorization`` header value received, in order.
    """

    def __init__(self, root: Path) -> None:
        self.authorizations: list[str] = []
        seen = self.authorizations

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(root), **kwargs)

            def do_GET(self) -> None:
                if "Authorization" in self.headers:
                    seen.append(self.headers["Authorization"])
                super().do_GET()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> GitHttpServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def basic_auth(token: str) -> str:
    """The ``Authorization`` value git sends for an installation token (``x-access-token``)."""
    return "basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()


async def enqueue_gate(pool: ArqRedis, payload: GatePayload) -> None:
    """Enqueue ``payload``'s gate job under the job id the web process gives it."""
    await pool.enqueue_job("gate_pull_request", payload, _job_id=gate_job_id(
        payload["repo"], payload["pr_number"], payload["head_sha"]))


def gate_payload(clone_url: str, head_sha: str, base_sha: str, *, number: int = 1,
                 repo: str = REPO) -> GatePayload:
    """Return the job payload the web process would enqueue for one pull request head."""
    return {"delivery_id": f"test-{number}-{head_sha[:7]}", "installation_id": INSTALLATION_ID,
            "repo": {"owner": OWNER, "name": repo, "clone_url": clone_url},
            "pr_number": number, "head_sha": head_sha, "base_sha": base_sha, "base_ref": "main",
            "head_repo": f"{OWNER}/{repo}", "author": WRITER}


def files_containing(root: Path, needles: list[str]) -> list[Path]:
    """Return every file under ``root`` whose bytes contain any of ``needles``."""
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if any(n.encode() in data for n in needles):
                hits.append(path)
    return hits


def iter_worktrees(repo: Path) -> Iterator[str]:
    """Yield the paths ``git worktree list --porcelain`` reports for ``repo``."""
    for line in git(repo, "worktree", "list", "--porcelain").splitlines():
        if line.startswith("worktree "):
            yield line.removeprefix("worktree ")


@contextmanager
def fake_github_env(monkeypatch: pytest.MonkeyPatch, redis_url: str, workdir: Path, *,
                    keys: tuple[str, str] | None = None,
                    installations: Collection[int] = (INSTALLATION_ID,),
                    collaborators: dict[str, str] | None = None,
                    **extra_env: str) -> Iterator[FakeGitHubServer]:
    """Yield a fresh fake GitHub; the worker's environment points at it and at ``redis_url``.

    Args:
        monkeypatch: sets ``GITHUB_APP_ID`` (`APP_ID`), ``GITHUB_APP_PRIVATE_KEY``,
            ``GITHUB_API_URL``, ``REDIS_URL``, ``LLMGATE_WORKDIR`` and ``extra_env``.
        redis_url: the worker's Redis.
        workdir: the worker's working directory (``LLMGATE_WORKDIR``).
        keys: the App's (private PEM, public PEM); a fresh pair when None.
        installations: the installation ids the fake knows.
        collaborators: login -> role (``write``, ``read``, ...); `WRITER` may write when None.
        extra_env: more variables for the worker (they may override the ones above).
    """
    private_pem, public_pem = keys if keys is not None else generate_app_keypair()
    config = {"app_id": APP_ID, "public_key_pem": public_pem, "installations": [*installations],
              "collaborators": {WRITER: "write"} if collaborators is None else collaborators}
    with running_fake_github(config) as server:
        env = {"GITHUB_APP_ID": APP_ID, "GITHUB_APP_PRIVATE_KEY": private_pem,
               "GITHUB_API_URL": server.url, "REDIS_URL": redis_url,
               "LLMGATE_WORKDIR": str(workdir), **extra_env}
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        yield server


@pytest.fixture()
def github(monkeypatch: pytest.MonkeyPatch, redis_url: str,
           tmp_path: Path) -> Iterator[FakeGitHubServer]:
    """A fresh fake GitHub (installation 7, `WRITER` may write), and the worker's environment
    pointing at it and at Redis, with ``tmp_path / "work"`` as its working directory."""
    with fake_github_env(monkeypatch, redis_url, tmp_path / "work") as server:
        yield server


@pytest.fixture(scope="module")
def tiny_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """`build_tiny_repo` once per test module: (its path, branch -> commit SHA)."""
    repo = tmp_path_factory.mktemp("tiny-repo") / "tiny"
    return repo, build_tiny_repo(repo)
