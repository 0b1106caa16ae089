"""The chaos harness: every part of llmgate as a real process, and the faults of issue 14.

`ChaosFakes` runs the schema-checking fake GitHub (``tests.fakes.fake_github``, GitHub's
documented secondary rate limits enforced) and the fake provider (``tests.fakes.fake_llm``) as
processes, shared by the stacks of a test module. `ChaosStack` starts, on loopback, a
``redis-server`` for the queue (restartable on the same port, with or without AOF, with a chosen
``maxmemory`` and ``maxmemory-policy``: `chaos_processes.RedisProcess`; optionally a second one
for the response cache), the
web process (uvicorn ``app.main:app``) and N arq workers, each a process of its own with its
log in the stack's folder (``<name>.log``). It sends signed
deliveries as GitHub would (the pull request moves to the pushed head first; a refused delivery
is not sent again, as GitHub does not redeliver by itself), kills and restarts workers (by
hand, or a supervisor thread restarting any that exits, as a container's restart policy does),
and restarts Redis. `ChaosStack.settle` waits until every pull request's newest head has a
concluded ``llmgate`` check run and nothing is in progress, or the time is up, and returns the
`chaos_tally.Tally` of what GitHub shows.

Everything runs on 127.0.0.1; nothing but loopback is reached.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx
from redis.exceptions import RedisError

from tests.conftest import free_port
from tests.e2e.chaos_processes import (
    RedisOptions,
    RedisProcess,
    cwd_inside,
    descendants,
    in_target_view,
    pids,
)
from tests.e2e.chaos_repo import KEY_ENV, ChaosRepo
from tests.e2e.chaos_tally import Delivery, Tally, tally
from tests.fakes.fake_github import FakeGitHubRemote, generate_app_keypair
from tests.timing import scaled
from worker.cli.demo import APP_ID, BOT_LOGIN, DEMO_WRITERS, pull_request_payload, sign
from worker.runtime.metrics import WORKERS_KEY
from worker.security.children import stop_processes

ROOT = Path(__file__).resolve().parents[2]
OWNER, REPO = "acme", "chaos"
SECRET = "chaos-secret"
#: Worker settings of every chaos stack: a killed worker's job resumes within 6 s and the
#: sweeper looks every 5 s, so "stuck" after a settle of 30 s means stuck beyond their reach.
#: The reconciler (worker/gate/reconcile.py) passes every 5 s too.
CHAOS_WORKER_ENV = {"LLMGATE_JOB_LEASE_S": "6", "LLMGATE_SWEEP_INTERVAL_S": "5",
                    "LLMGATE_RECONCILE_S": "5",
                    "LLMGATE_JOB_TIMEOUT_S": "120", "LLMGATE_SHUTDOWN_GRACE_S": "0",
                    KEY_ENV: "sk-chaos-fake"}


@dataclass
class Worker:
    """One worker slot: its current process and every process it had, oldest first."""

    name: str
    proc: subprocess.Popen[bytes]
    history: list[subprocess.Popen[bytes]] = field(default_factory=list)
    wanted: bool = True  # False once the stack stops: the supervisor leaves it down
    down_since: float | None = None  # when the supervisor saw it exit (monotonic seconds)

    def exit_codes(self) -> list[int]:
        """Exit codes of this slot's processes that ended (-9: SIGKILL), oldest first."""
        return [code for p in [*self.history, self.proc] if (code := p.poll()) is not None]


class _Started:
    """A context manager over ``_start`` and ``close`` (``close`` also when ``_start`` fails)."""

    def _start(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop what ``_start`` started."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ChaosFakes(_Started):
    """The fake GitHub and the fake provider as processes, shareable by several stacks.

    Use as a context manager (a module-scoped fixture, say); each `ChaosStack` given these
    resets the fake GitHub's records and configuration when it starts.
    """

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.private_pem, self.public_pem = generate_app_keypair()
        self._procs: list[subprocess.Popen[bytes]] = []
        self.github = FakeGitHubRemote("http://127.0.0.1:0")
        self.llm_url = ""

    def _start(self) -> None:
        gh = self._serve("github", [sys.executable, "-m", "tests.fakes.fake_github"])
        self.github = FakeGitHubRemote(gh["url"])
        self.llm_url = self._serve("llm", [sys.executable, "-m", "tests.fakes.fake_llm"])["url"]

    def _serve(self, name: str, cmd: list[str]) -> dict[str, Any]:
        ready = self.workdir / f"{name}-ready.json"
        log = (self.workdir / f"{name}.log").open("ab")
        proc = subprocess.Popen([*cmd, "--port", "0", "--ready-file", str(ready)], cwd=ROOT,
                                stdout=log, stderr=subprocess.STDOUT)
        self._procs.append(proc)
        deadline = time.monotonic() + 60
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start (see {name}.log)")
            time.sleep(0.05)
        info: dict[str, Any] = json.loads(ready.read_text())
        return info

    def reset(self) -> None:
        """Forget every record and fault; configure the App, its writers and GitHub's
        secondary limits; forget the provider's calls and rules."""
        self.github.setup({"reset_config": True, "app_id": APP_ID,
                           "public_key_pem": self.public_pem, "bot_login": BOT_LOGIN,
                           "app_slug": "llmgate-demo", "collaborators": DEMO_WRITERS,
                           "secondary_limits": {}})
        self.llm("reset")
        self.llm("setup", {"rules": [], "default_reply": None, "latency_ms": 0})

    def llm(self, action: str, body: dict[str, Any] | None = None) -> Any:
        """POST the fake provider's control ``/_fake/<action>`` (``setup``, ``reset``) or, for
        ``state``, GET it; return its JSON answer."""
        root = self.llm_url.removesuffix("/v1")
        if action == "state":
            resp = httpx.get(f"{root}/_fake/state", timeout=10)
        else:
            resp = httpx.post(f"{root}/_fake/{action}", json=body, timeout=10)
        resp.raise_for_status()
        return resp.json()

    def close(self) -> None:
        """Stop both processes."""
        stop_processes(self._procs)


class ChaosStack(_Started):
    """Redis, the fake GitHub, the fake provider, the web process and workers (module doc).

    Use as a context manager; every process it started is stopped on exit (workers first,
    Redis last). Raises RuntimeError or TimeoutError when a part does not start.
    """

    def __init__(self, workdir: Path, fakes: ChaosFakes, *, workers: int = 2,
                 redis: RedisOptions | None = None, cache_redis: RedisOptions | None = None,
                 worker_env: dict[str, str] | None = None, supervise: bool = False,
                 restart_delay_s: float = 1.0) -> None:
        self.workdir, self.fakes = workdir, fakes
        self.github, self.llm_url = fakes.github, fakes.llm_url
        self.redis = RedisProcess(workdir, "redis", redis or RedisOptions())
        self.cache_redis = None if cache_redis is None else RedisProcess(
            workdir, "cache-redis", cache_redis)
        self.worker_count, self.supervise = workers, supervise
        self.restart_delay_s = restart_delay_s
        self.worker_env_extra = worker_env or {}
        self.workers: list[Worker] = []
        self.deliveries: list[Delivery] = []
        self._procs: list[subprocess.Popen[bytes]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._supervisor: threading.Thread | None = None
        self._http = httpx.Client(timeout=10)  # keep-alive, as GitHub's hookshot
        self.web_url = ""

    # ------------------------------------------------------------------ starting
    def _spawn(self, name: str, cmd: list[str], env: dict[str, str] | None = None,
               ) -> subprocess.Popen[bytes]:
        log = (self.workdir / f"{name}.log").open("ab")
        proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=log,
                                stderr=subprocess.STDOUT)
        self._procs.append(proc)
        return proc

    def _start(self) -> None:
        self.redis.start()
        if self.cache_redis is not None:
            self.cache_redis.start()
        self.fakes.reset()
        key_file = self.workdir / "app-private-key.pem"
        key_file.write_text(self.fakes.private_pem)
        key_file.chmod(0o600)
        self._start_web()
        self._worker_env = {
            "GITHUB_APP_ID": APP_ID, "GITHUB_APP_PRIVATE_KEY_FILE": str(key_file),
            "GITHUB_API_URL": self.github.url, "REDIS_URL": self.redis.url,
            "LLMGATE_WORKDIR": str(self.workdir / "checkouts"), **CHAOS_WORKER_ENV,
            **({"LLMGATE_CACHE_REDIS_URL": self.cache_redis.url} if self.cache_redis else {}),
            **self.worker_env_extra}
        for i in range(self.worker_count):
            self.workers.append(Worker(f"worker-{i}", self._start_worker(f"worker-{i}")))
        for w in self.workers:
            self.wait_ready(w)
        if self.supervise:
            self._supervisor = threading.Thread(target=self._supervise, daemon=True)
            self._supervisor.start()

    def web_env(self) -> dict[str, str]:
        """The web process's environment (its secret and the queue's Redis)."""
        return {"GITHUB_WEBHOOK_SECRET": SECRET, "REDIS_URL": self.redis.url,
                **({"LLMGATE_CACHE_REDIS_URL": self.cache_redis.url} if self.cache_redis else {})}

    def _start_web(self) -> None:
        port = free_port()
        web = self._spawn("web", [sys.executable, "-m", "uvicorn", "app.main:app", "--host",
                                  "127.0.0.1", "--port", str(port), "--log-level", "warning"],
                          self.web_env())
        self.web_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if web.poll() is not None:
                raise RuntimeError(f"the web process exited with {web.returncode} (web.log)")
            try:
                httpx.get(f"{self.web_url}/healthz", timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise TimeoutError("the web process did not answer within 60 s")

    def worker_environment(self) -> dict[str, str]:
        """The workers' environment on top of the test's (App, fake GitHub, Redis, limits)."""
        return dict(self._worker_env)

    def _start_worker(self, name: str) -> subprocess.Popen[bytes]:
        return self._spawn(name, [sys.executable, "-m", "arq", "worker.main.WorkerSettings"],
                           self._worker_env)

    # ------------------------------------------------------------------ workers
    def _supervise(self) -> None:
        """Restart every worker that exited, ``restart_delay_s`` later (a restart policy)."""
        while not self._stop.wait(0.2):
            with self._lock:
                for w in self.workers:
                    if not w.wanted or w.proc.poll() is None:
                        continue
                    if w.down_since is None:
                        w.down_since = time.monotonic()
                    elif time.monotonic() - w.down_since >= self.restart_delay_s:
                        w.history.append(w.proc)
                        w.proc, w.down_since = self._start_worker(w.name), None

    def kill_worker(self, worker: Worker, sig: int = signal.SIGKILL) -> int:
        """Send ``sig`` to the worker's process, wait for it to exit; return its exit code
        (the supervisor, when on, starts it again)."""
        worker.proc.send_signal(sig)
        return worker.proc.wait(timeout=60)

    def wait_ready(self, worker: Worker, timeout_s: float = 90) -> None:
        """Wait until the worker's process has published a heartbeat (it takes jobs).

        Raises:
            RuntimeError: it exited first. TimeoutError: no heartbeat within ``timeout_s``
            (`tests.timing.scaled`).
        """
        deadline = time.monotonic() + scaled(timeout_s)
        client = self.redis.client()
        try:
            while time.monotonic() < deadline:
                if worker.proc.poll() is not None:
                    raise RuntimeError(f"{worker.name} exited with {worker.proc.returncode}")
                with contextlib.suppress(OSError, RedisError):
                    beats = client.hkeys(WORKERS_KEY)
                    if any(f":{worker.proc.pid}:".encode() in b for b in beats):
                        return
                time.sleep(0.2)
        finally:
            client.close()
        raise TimeoutError(f"{worker.name} published no heartbeat within {timeout_s} s")

    def live_workers(self) -> list[Worker]:
        """The workers whose process runs now."""
        return [w for w in self.workers if w.proc.poll() is None]

    def worker_exits(self) -> dict[str, list[int]]:
        """Each worker slot's exit codes so far (supervised restarts included)."""
        return {w.name: w.exit_codes() for w in self.workers}

    # ------------------------------------------------------------------ driving
    def move(self, repo: ChaosRepo, heads: dict[int, int]) -> None:
        """Tell GitHub that each PR ``pr`` (branch ``pr/<pr>``) is at push ``heads[pr]``."""
        self.github.setup({"pulls": [{
            "owner": OWNER, "repo": REPO, "number": pr, "head_sha": repo.heads[(pr, push)],
            "base_sha": repo.main, "base_ref": "main", "head_ref": f"pr/{pr}",
            "clone_url": repo.clone_url} for pr, push in heads.items()]})

    def push(self, repo: ChaosRepo, pr: int, push: int = 1, *, move: bool = True) -> Delivery:
        """Move PR ``pr`` to head ``(pr, push)`` on GitHub (unless ``move`` is False: a burst
        moves every PR first), then deliver its ``pull_request`` event (``opened`` for push 1,
        else ``synchronize``)."""
        if move:
            self.move(repo, {pr: push})
        head = repo.heads[(pr, push)]
        payload = pull_request_payload("opened" if push == 1 else "synchronize",
                                       owner=OWNER, repo=REPO, clone_url=repo.clone_url,
                                       number=pr, head_sha=head, base_sha=repo.main,
                                       head_ref=f"pr/{pr}")
        return self.deliver(pr, head, "pull_request", payload)

    def deliver(self, pr: int, head_sha: str, event: str, payload: dict[str, Any]) -> Delivery:
        """POST one signed delivery to the web process; record when and what it answered
        (status 0: no answer at all)."""
        body = json.dumps(payload).encode()
        headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": str(uuid.uuid4()),
                   "X-Hub-Signature-256": sign(SECRET, body),
                   "Content-Type": "application/json", "User-Agent": "GitHub-Hookshot/chaos"}
        sent = time.time()
        try:
            resp = self._http.post(f"{self.web_url}/webhook", content=body, headers=headers)
            status, answer = resp.status_code, resp.text[:200]
        except httpx.HTTPError as exc:
            status, answer = 0, type(exc).__name__
        delivery = Delivery(pr, head_sha, sent, status, answer)
        self.deliveries.append(delivery)
        return delivery

    def tally(self, newest: dict[int, str]) -> Tally:
        """What GitHub shows now, counted per pull request's newest head (`chaos_tally`)."""
        return tally(self.github.state(), newest, self.deliveries)

    def settle(self, newest: dict[int, str], timeout_s: float, *,
               stop_on_duplicate: bool = True) -> Tally:
        """Wait until every newest head is concluded and no check run is in progress, or
        ``timeout_s`` seconds, or (``stop_on_duplicate``) a duplicate shows: a check run or
        comment too many is never taken back, so the outcome is known; return the tally.
        ``timeout_s`` is `tests.timing.scaled`."""
        deadline = time.monotonic() + scaled(timeout_s)
        while True:
            counted = self.tally(newest)
            if counted.converged or (stop_on_duplicate and counted.duplicated) or \
                    time.monotonic() > deadline:
                return counted
            time.sleep(0.5)

    def wait_concluded(self, head_sha: str, timeout_s: float) -> None:
        """Wait until the check run GitHub shows for ``head_sha`` is completed.

        Raises:
            TimeoutError: it was not within ``timeout_s`` seconds (`tests.timing.scaled`).
        """
        deadline = time.monotonic() + scaled(timeout_s)
        while time.monotonic() < deadline:
            runs = [r for r in self.github.state()["check_runs"] if r["head_sha"] == head_sha]
            if runs and max(runs, key=lambda r: r["id"])["status"] == "completed":
                return
            time.sleep(0.3)
        raise TimeoutError(f"no concluded check run on {head_sha[:7]} within {timeout_s} s")

    def worker_running_a_target(self) -> tuple[Worker, list[int]] | None:
        """A live worker with target processes among its descendants, and their pids (a
        target's working directory is a copy of its checkout, worker/security/target_view.py,
        or inside the checkouts); None when no target runs."""
        inside = {*self.processes_under(self.workdir / "checkouts"),
                  *(pid for pid in pids() if in_target_view(pid))}
        for w in self.live_workers():
            targets = [pid for pid in descendants(w.proc.pid) if pid in inside]
            if targets:
                return w, targets
        return None

    def log_lines(self, *needles: str) -> list[str]:
        """Lines of every process log holding one of ``needles`` (for the report of a test)."""
        out = []
        for path in sorted(self.workdir.glob("*.log")):
            for line in path.read_text(errors="replace").splitlines():
                if any(n in line for n in needles):
                    out.append(f"{path.stem}: {line.strip()[:300]}")
        return out

    def processes_under(self, folder: Path) -> list[int]:
        """Pids of live processes whose working directory is inside ``folder`` (targets)."""
        return [pid for pid in pids() if cwd_inside(pid, folder)]

    # ------------------------------------------------------------------ stopping
    def close(self) -> None:
        """Stop the supervisor and every process this stack started (Redis last)."""
        self._stop.set()
        self._http.close()
        if self._supervisor is not None:
            self._supervisor.join(timeout=5)
        with self._lock:
            for w in self.workers:
                w.wanted = False
            stop_processes([w.proc for w in self.workers] + self._procs)
        for server in (self.cache_redis, self.redis):
            if server is not None:
                server.stop()
