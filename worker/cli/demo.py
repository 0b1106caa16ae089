"""Run the whole system on loopback: redis-server, a GitHub emulator, the web process, workers.

`Stack` is what ``llmgate demo`` and the end-to-end tests share: every part is a real process
talking real HTTP or the Redis protocol on 127.0.0.1. The GitHub emulator is the schema-checking
fake of ``tests/fakes``, so this module needs a source checkout of llmgate.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from worker.security import stop_processes

#: The source checkout this module belongs to (holds tests/ and examples/).
SOURCE_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = SOURCE_ROOT / "tests" / "fixtures" / "github" / "webhooks"
APP_ID = "4242"
INSTALLATION_ID = 1
BOT_LOGIN = "llmgate-demo[bot]"
#: The pull request authors of GitHub's example payloads (webhook and REST) may write to the
#: demo repository, so their pull requests are trusted and run without an approval.
DEMO_WRITERS = {"Codertocat": "admin", "octocat": "admin"}


def sign(secret: str, body: bytes) -> str:
    """Return GitHub's ``X-Hub-Signature-256`` header value for ``body``.

    Source: GitHub docs, "Validating webhook deliveries" (HMAC-SHA256, hex, ``sha256=`` prefix).
    """
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, timeout_s: float, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout_s} s")


class Stack:
    """Redis, the GitHub emulator, the web process and ``workers`` arq workers, as processes.

    Use as a context manager. ``workdir`` receives the logs (``*.log``), the App key and the
    workers' checkouts. Raises RuntimeError or TimeoutError when a part does not start.
    """

    def __init__(self, workdir: Path, *, workers: int = 1, secret: str = "demo-secret",  # noqa: S107 (a local demo)
                 worker_env: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        self.worker_env = worker_env or {}
        self.secret = secret
        self.workers = workers
        self.procs: list[subprocess.Popen[bytes]] = []
        self.redis_url = ""
        self.web_url = ""
        self.github_url = ""
        self._worker_env: dict[str, str] = {}

    def __enter__(self) -> Stack:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str] | None = None,
               ) -> subprocess.Popen[bytes]:
        log = (self.workdir / f"{name}.log").open("ab")
        full_env = {**os.environ, **(env or {})}
        proc = subprocess.Popen(cmd, cwd=SOURCE_ROOT, env=full_env, stdout=log,
                                stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def _start(self) -> None:
        redis_port = _free_port()
        redis_bin = shutil.which("redis-server")
        if redis_bin is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        self._spawn("redis", [redis_bin, "--port", str(redis_port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no", "--dir", str(self.workdir)])
        self.redis_url = f"redis://127.0.0.1:{redis_port}/0"
        private_pem, public_pem = _keypair()
        key_file = self.workdir / "app-private-key.pem"
        key_file.write_text(private_pem)
        key_file.chmod(0o600)
        self._start_github(public_pem)
        web_port = _free_port()
        web = self._spawn("web", [sys.executable, "-m", "uvicorn", "app.main:app", "--host",
                                  "127.0.0.1", "--port", str(web_port), "--log-level", "warning"],
                          {"GITHUB_WEBHOOK_SECRET": self.secret, "REDIS_URL": self.redis_url})
        self.web_url = f"http://127.0.0.1:{web_port}"
        _wait_http(f"{self.web_url}/healthz", 30, web)
        self._worker_env = {"GITHUB_APP_ID": APP_ID, "GITHUB_APP_PRIVATE_KEY_FILE": str(key_file),
                            "GITHUB_API_URL": self.github_url, "REDIS_URL": self.redis_url,
                            "LLMGATE_WORKDIR": str(self.workdir / "checkouts"), **self.worker_env}
        for i in range(self.workers):
            self.start_worker(f"worker-{i}")

    def start_worker(self, name: str) -> subprocess.Popen[bytes]:
        """Start one more arq worker process (log ``<name>.log``) on this stack; return it."""
        return self._spawn(name, [sys.executable, "-m", "arq", "worker.main.WorkerSettings"],
                           self._worker_env)

    def _start_github(self, public_pem: str) -> None:
        ready = self.workdir / "github-ready.json"
        setup = self.workdir / "github-setup.json"
        setup.write_text(json.dumps({"app_id": APP_ID, "public_key_pem": public_pem,
                                     "bot_login": BOT_LOGIN, "app_slug": "llmgate-demo",
                                     "collaborators": DEMO_WRITERS}))
        proc = self._spawn("github", [sys.executable, "-m", "tests.fakes.fake_github", "--port",
                                      "0", "--ready-file", str(ready), "--setup-file", str(setup)])
        deadline = time.monotonic() + 30
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the GitHub emulator did not start (see github.log)")
            time.sleep(0.05)
        self.github_url = json.loads(ready.read_text())["url"]

    def stop(self) -> None:
        """Terminate every process (`worker.security.children.stop_processes`): the web
        process, the workers and the GitHub emulator first, newest first, Redis (the first
        started) once they have exited, so the workers record their last state in it."""
        for group in (self.procs[1:], self.procs[:1]):
            stop_processes(group[::-1])
        self.procs.clear()

    # ------------------------------------------------------------------ driving it
    def github(self, method: str, path: str, body: Any = None) -> Any:
        """Call the emulator's control API (``/_fake/...``) and return its JSON answer."""
        resp = httpx.request(method, f"{self.github_url}{path}", json=body, timeout=10)
        resp.raise_for_status()
        return resp.json() if resp.content else None

    def state(self) -> dict[str, Any]:
        """Return everything the GitHub emulator recorded."""
        data: dict[str, Any] = self.github("GET", "/_fake/state")
        return data

    def deliver(self, event: str, payload: dict[str, Any] | bytes, *,
                delivery_id: str | None = None, secret: str | None = None) -> httpx.Response:
        """POST one signed delivery to the web process and return its response."""
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery_id or str(uuid.uuid4()),
                   "X-Hub-Signature-256": sign(secret or self.secret, body),
                   "Content-Type": "application/json", "User-Agent": "GitHub-Hookshot/demo"}
        return httpx.post(f"{self.web_url}/webhook", content=body, headers=headers, timeout=10)

    def wait_for_check(self, head_sha: str, *, timeout_s: float = 120,
                       count: int = 1) -> list[dict[str, Any]]:
        """Wait until ``count`` check runs on ``head_sha`` are completed; return all of them.

        Raises:
            TimeoutError: they did not complete in ``timeout_s`` seconds.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            runs = [r for r in self.state()["check_runs"] if r["head_sha"] == head_sha]
            if sum(r["status"] == "completed" for r in runs) >= count:
                return runs
            time.sleep(0.2)
        raise TimeoutError(f"no completed check run on {head_sha[:7]} after {timeout_s} s")


def _keypair() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public.decode()


def pull_request_payload(action: str, *, owner: str, repo: str, clone_url: str, number: int,
                         head_sha: str, base_sha: str, base_ref: str = "main",
                         head_ref: str = "pr") -> dict[str, Any]:
    """Return a ``pull_request`` delivery built from GitHub's published example payload."""
    data: dict[str, Any] = json.loads((FIXTURES / "pull_request.opened.json").read_text())
    data["action"] = action
    data["number"] = number
    data["installation"] = {"id": INSTALLATION_ID, "node_id": "MDIz"}
    repository = data["repository"]
    repository.update(name=repo, full_name=f"{owner}/{repo}", clone_url=clone_url)
    repository["owner"]["login"] = owner
    pr = data["pull_request"]
    pr["number"] = number
    pr["head"].update(sha=head_sha, ref=head_ref, repo=repository)
    pr["base"].update(sha=base_sha, ref=base_ref, repo=repository)
    return data


def issue_comment_payload(*, owner: str, repo: str, clone_url: str, number: int, body: str,
                          login: str, user_type: str = "User", action: str = "created",
                          comment_id: int = 9001, on_pull_request: bool = True) -> dict[str, Any]:
    """Return an ``issue_comment`` delivery built from the PR-comment example payload."""
    path = FIXTURES / "issue_comment.created.on-pull-request.DERIVED.json"
    data: dict[str, Any] = json.loads(path.read_text())
    data["action"] = action
    data["installation"] = {"id": INSTALLATION_ID, "node_id": "MDIz"}
    data["repository"].update(name=repo, full_name=f"{owner}/{repo}", clone_url=clone_url)
    data["repository"]["owner"]["login"] = owner
    data["issue"]["number"] = number
    if not on_pull_request:
        data["issue"].pop("pull_request", None)
    data["comment"].update(id=comment_id, body=body)
    data["comment"]["user"].update(login=login, type=user_type)
    return data


def build_example_repo(dest: Path) -> dict[str, str]:
    """Build examples/support-bot into a git repository at ``dest``; return branch -> SHA.

    Raises:
        RuntimeError: the build failed (e.g. git is not installed), with its last output.
    """
    script = SOURCE_ROOT / "examples" / "support-bot" / "build_repo.py"
    out = subprocess.run([sys.executable, str(script), str(dest)], check=False,
                         capture_output=True, text=True)
    if out.returncode:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        raise RuntimeError("building the example repository failed (is git installed?): "
                           + " / ".join(tail))
    shas: dict[str, str] = json.loads(out.stdout)
    return shas


def run_demo() -> int:
    """Gate the support-bot example's regressing PR, then its fix, and print what GitHub shows.

    Returns 0 when the pipeline ran end to end (whatever the verdicts), 1 otherwise.
    """
    if not (SOURCE_ROOT / "tests" / "fakes" / "fake_github.py").exists():
        print("llmgate demo needs a source checkout of llmgate (pip install -e .)",
              file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="llmgate-demo-") as tmp:
        work = Path(tmp)
        clone_url = (work / "support-bot").as_uri()
        try:
            shas = build_example_repo(work / "support-bot")
            with Stack(work) as stack:
                return _demo_steps(stack, shas, clone_url)
        except (RuntimeError, TimeoutError) as err:
            print(f"llmgate demo: {err}", file=sys.stderr)
            for log in sorted(work.glob("*.log")):
                print(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}",
                      file=sys.stderr)
            return 1


def _demo_steps(stack: Stack, shas: dict[str, str], clone_url: str) -> int:
    owner, repo = "acme", "support-bot"
    steps = [("opened", shas["pr/regress"], "a prompt change that breaks tickets"),
             ("synchronize", shas["pr/fix"], "a follow-up push that fixes them")]
    for action, head_sha, what in steps:
        # GitHub's pull request moves to the pushed head before the delivery is sent; a worker
        # that asks it which head is newest (supersede) must not hear of an older one
        stack.github("POST", "/_fake/setup", {"pulls": [{
            "owner": owner, "repo": repo, "number": 1, "head_sha": head_sha,
            "base_sha": shas["main"], "base_ref": "main", "head_ref": "pr/regress",
            "clone_url": clone_url}]})
        print(f"\n=== pull_request {action}: {what} (head {head_sha[:7]})")
        payload = pull_request_payload(action, owner=owner, repo=repo, clone_url=clone_url,
                                       number=1, head_sha=head_sha, base_sha=shas["main"])
        resp = stack.deliver("pull_request", payload)
        print(f"webhook answered {resp.status_code} {resp.text}")
        run = stack.wait_for_check(head_sha)[-1]
        print(f"check run '{run['name']}': {run['status']} / {run['conclusion']}")
        print(f"title: {run['output']['title']}\n\n{run['output']['summary']}")
        print(f"annotations: {len(run['annotations'])}")
        for note in run["annotations"][:5]:
            print(f"  {note['path']}:{note['start_line']}  {note['title']}")
        if len(run["annotations"]) > 5:
            print(f"  ... and {len(run['annotations']) - 5} more")
    comments = stack.state()["comments"]
    print(f"\n=== sticky PR comment ({len(comments)} comment(s), edited in place)\n")
    print(comments[-1]["body"] if comments else "(none)")
    return 0
