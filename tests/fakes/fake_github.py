"""A fake GitHub REST API over real HTTP that cannot drift from the real one.

Every request is checked against GitHub's own REST description (``tests/fixtures/github``:
``validate.py`` with ``strict=True`` over ``rest-subset.json``), and every answer starts from the
spec's example and is itself validated against the spec's response schema. What the fake finds
wrong is answered as GitHub would and recorded in ``violations``:

- a path/method outside ``rest-subset.json``: 404, kind ``unknown_endpoint``;
- a body or query the spec refuses (e.g. 51 annotations): 422 ``Validation Failed``, kind
  ``invalid_request``; a body that is not JSON: 400, kind ``invalid_json``;
- a text over GitHub's limit counted in UTF-8 bytes, as GitHub counts it (`BYTE_LIMITS`): a
  check run ``output.summary`` / ``output.text`` over 65535 bytes (github/docs#35252: "summary
  exceeds a maximum bytesize of 65535", though the docs say characters) or a comment body over
  65535 bytes (GitHub's message speaks of 65536 characters; the fake holds the strictest
  reading): 422 with GitHub's ``errors`` shape, kind ``too_long``;
- no ``User-Agent``: 403, kind ``no_user_agent``;
- ``/app`` endpoints without a valid App JWT (RS256 under the configured public key,
  ``iss`` = App id, ``exp - iat <= 660 s``; by the fake's clock ``iat`` not in the future and
  ``exp`` in the future but at most 10 minutes ahead, answered with GitHub's words, e.g.
  "'Issued at' claim ('iat') must be an Integer representing a time in the past"), or
  ``/repos`` endpoints without a live installation token (``token X`` or ``Bearer X``; not
  expired nor revoked: "Bad credentials"): 401, kind ``auth``;
- a resource nobody configured or created (pull request, check run, comment): 404, kind
  ``not_found``; an answer that fails the spec's schema: kind ``invalid_response``.

The API is served at the root and under ``/api/v3`` (GitHub Enterprise Server style). Every
answer carries a ``Date`` header of the fake's clock (``clock_offset_s`` seconds from this
machine's, 0 by default), as GitHub's do.
Control endpoints (never recorded): ``GET /_fake/state`` (JSON of config, ``check_runs`` with
``history`` and accumulated ``annotations``, ``comments`` with edit ``history``, ``reactions``,
``tokens``, ``requests`` with method, path (API path + query), raw_path, operation, status,
auth, body, fault, at (Unix seconds when it arrived), installation_id (token requests),
``violations``, ``faults``);
``POST /_fake/setup`` (JSON merged into the config: ``app_id``, ``public_key_pem``, ``app_slug``,
``bot_login``, ``installations`` (list of ids; any when absent), ``token_ttl_s``,
``clock_offset_s`` (the fake's clock minus this machine's, seconds),
``collaborators`` {login: role or null}, ``renamed`` [{from: "owner/old", to: "owner/new",
id}] (a repository renamed or transferred now: what the fake holds of it moves with it, its
old ``/repos/owner/old/...`` paths answer 301, or 307 for a method other than GET, with a
``Location`` on ``/repositories/{id}/...``, served as the new name's paths; the ``path``
recorded is then the ``/repos/owner/new/...`` one), ``pulls``
[{owner, repo, number, head_sha, base_sha, base_ref, head_ref, clone_url, head_repo_full_name,
head_clone_url, state, files, author}], ``contents``
{"owner/repo": {path: text}}, ``comments`` [{owner, repo, issue_number, body, user_login,
user_type}] seeded as existing, ``locked`` [{owner, repo, issue_number, comment_ids?}]
conversations locked (a comment is refused 403, a reaction 422), ``faults`` [{method?,
operation?, path?, path_glob?, body_match?, status, times?, rate?, seed?, after?, headers?,
body?, rate_limit_reset_in_s?, revoke_token?}] answered instead of the real thing, or after it
(``after``); ``revoke_token`` refuses the request's installation token from then on,
``secondary_limits`` ({} for GitHub's documented figures, null for none; both in
``fake_github_faults``), ``clear_faults``: true to drop the faults left (before adding any
given), ``reset``: true to forget all records first, ``reset_config``: true to also restore the
default configuration first); ``POST /_fake/reset`` (records only). A request answered by a
fault has ``fault`` true and ``fault_after`` telling whether it was performed; one over a
secondary limit is a violation of kind ``secondary_rate_limit``, answered 403 with
``retry-after``.

Sign-in (issue 35): ``/login/oauth/authorize``, ``/login/oauth/access_token``, ``/user``,
``/user/installations[/{id}/repositories]`` and ``/repos/{owner}/{repo}`` are served by
``fake_github_oauth`` (setup key ``oauth``, its records under ``oauth`` in the state).

In-process: ``with running_fake_github(config) as gh: ... gh.url ... gh.state()``.
As a process: ``python -m tests.fakes.fake_github --port 0 --ready-file R --state-file S
--app-id 1 --public-key-file app.pub.pem [--setup-file cfg.json]`` (or
``running_fake_github_process``); the state file is rewritten after every request.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from email.utils import formatdate
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes import fake_github_checks as checks
from tests.fakes import fake_github_faults as faults
from tests.fakes import fake_github_oauth as oauth
from tests.fakes.fake_github_model import Answer, Ctx, Examples, FakeModel, NotFound

GITHUB_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "github"
DOCS = "https://docs.github.com/rest"
ENTERPRISE_PREFIX = "/api/v3"
#: Endpoints that take an App JWT instead of an installation token.
JWT_OPERATIONS = frozenset({"apps/create-installation-access-token", "apps/get-authenticated",
                            "apps/get-repo-installation", "apps/list-installations"})
#: Longest accepted JWT lifetime (``exp - iat``): GitHub's 10 minutes plus 60 s of backdating.
MAX_JWT_LIFETIME_S = 660
#: Furthest in the future a JWT's ``exp`` may be, by the fake's clock: GitHub's 10 minutes.
MAX_JWT_EXP_AHEAD_S = 600
#: GitHub's 401 messages for JWT time claims (as GitHub words them).
IAT_IN_FUTURE = "'Issued at' claim ('iat') must be an Integer representing a time in the past"
EXP_TOO_FAR = "'Expiration time' claim ('exp') is too far in the future"
EXP_PASSED = ("'Expiration time' claim ('exp') must be a numeric value representing the future "
              "time at which the assertion expires")
#: operation -> (resource, field path in the body, UTF-8 byte limit, GitHub's error message).
_CHECK_RUN_LIMITS: list[tuple[str, tuple[str, ...], int, str]] = [
    ("CheckRun", ("output", key), 65535, f"{key} exceeds a maximum bytesize of 65535")
    for key in ("summary", "text")]
_COMMENT_LIMITS: list[tuple[str, tuple[str, ...], int, str]] = [
    ("IssueComment", ("body",), 65535, "body is too long (maximum is 65536 characters)")]
BYTE_LIMITS: dict[str, list[tuple[str, tuple[str, ...], int, str]]] = {
    "checks/create": _CHECK_RUN_LIMITS, "checks/update": _CHECK_RUN_LIMITS,
    "issues/create-comment": _COMMENT_LIMITS, "issues/update-comment": _COMMENT_LIMITS}


def over_byte_limit(op: str, body: Any) -> list[dict[str, str]]:
    """Return GitHub's ``errors`` entries for every text of ``body`` over its limit in UTF-8
    bytes (`BYTE_LIMITS`); [] when all fit."""
    errors = []
    for resource, path, limit, message in BYTE_LIMITS.get(op, []):
        value = body
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, str) and len(value.encode("utf-8")) > limit:
            errors.append({"resource": resource, "code": "custom", "field": path[-1],
                           "message": message})
    return errors


def load_validate() -> ModuleType:
    """Import ``tests/fixtures/github/validate.py`` (not a package) as a module."""
    spec = importlib.util.spec_from_file_location("github_rest_validate",
                                                  GITHUB_FIXTURES / "validate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generate_app_keypair(*, fresh: bool = False) -> tuple[str, str]:
    """Return the ``(private PEM, public PEM)`` RSA-2048 pair of a test App: one per process
    (made at its first use: about 50 ms each, issue 34), or a new one with ``fresh`` (a key
    that must differ from the App's)."""
    return _new_keypair() if fresh else _shared_keypair()


@functools.cache
def _shared_keypair() -> tuple[str, str]:
    return _new_keypair()


def _new_keypair() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public.decode()


def _error(status: int, message: str, **extra: Any) -> Answer:
    return status, {"message": message, "documentation_url": DOCS, "status": str(status),
                    **extra}, {}


class FakeGitHub:
    """The fake's state and its starlette ``app``; thread-safe (one lock around everything)."""

    def __init__(self, config: dict[str, Any] | None = None,
                 state_file: Path | None = None) -> None:
        self._validate = load_validate()
        self._subset = self._validate.RestSubset()
        self.model = FakeModel(Examples(self._subset.spec))
        self._lock = threading.Lock()
        self._state_file = state_file
        self.oauth = oauth.OAuthFake(self.model, self._lock, self._persist)  # sign-in, issue 35
        m = self.model
        self._handlers: dict[str, Callable[[Ctx], Answer]] = {
            "checks/create": lambda c: checks.create_check_run(m, c),
            "checks/update": lambda c: checks.update_check_run(m, c),
            "issues/create-comment": m.create_comment,
            "issues/update-comment": m.update_comment,
            "reactions/create-for-issue-comment": m.react,
            "repos/get-collaborator-permission-level": m.permission,
            "apps/create-installation-access-token": m.issue_token,
            "apps/get-authenticated": m.get_app,
            "apps/get-repo-installation": m.get_repo_installation,
            "pulls/get": lambda c: checks.get_pull(m, c),
            "repos/get-content": m.content,
            "checks/rerequest-suite": lambda c: checks.rerequest_suite(m, c),
            **self.oauth.handlers(),
        }
        self._lists: dict[str, tuple[Callable[[Ctx], list[Any]], str | None]] = {
            "issues/list-comments": (m.list_comments, None),
            "checks/list-for-ref": (lambda c: checks.list_check_runs_for_ref(m, c), "check_runs"),
            "pulls/list-files": (lambda c: checks.list_pull_files(m, c), None),
            "pulls/list": (lambda c: checks.list_pulls(m, c), None),
            "apps/list-installations": (lambda c: checks.list_installations(m, c), None),
            "apps/list-repos-accessible-to-installation": (
                lambda c: checks.list_installation_repos(m, c), "repositories"),
            **self.oauth.lists(),
        }
        methods = ["GET", "POST", "PATCH", "PUT", "DELETE"]
        self.app = Starlette(routes=[
            Route("/_fake/state", self._http_state, methods=["GET"]),
            Route("/_fake/setup", self._http_setup, methods=["POST"]),
            Route("/_fake/reset", self._http_reset, methods=["POST"]),
            *self.oauth.routes(),
            Route("/{path:path}", self._http_api, methods=methods),
        ])
        if config:
            self.setup(config)

    # ------------------------------------------------------------------ control
    def setup(self, cfg: dict[str, Any]) -> None:
        """Merge ``cfg`` into the configuration (keys in the module docstring)."""
        for pull in cfg.get("pulls", []):
            missing = {"owner", "repo", "number", "head_sha", "base_sha"} - set(pull)
            if missing:
                raise ValueError(f"pull {pull!r} lacks {sorted(missing)}")
        with self._lock:
            self.model.apply_setup(cfg)
            self.oauth.setup(cfg)
            self._persist()

    def state(self) -> dict[str, Any]:
        """Return a snapshot of everything recorded (see the module docstring)."""
        with self._lock:
            return {**self.model.snapshot(), "oauth": self.oauth.snapshot()}

    def reset(self) -> None:
        """Forget every record; keep the configuration."""
        with self._lock:
            self.model.reset()
            self._persist()

    def _persist(self) -> None:
        if self._state_file is None:
            return
        tmp = self._state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.model.snapshot()))
        os.replace(tmp, self._state_file)

    async def _http_state(self, request: Request) -> Response:
        return JSONResponse(self.state())

    async def _http_setup(self, request: Request) -> Response:
        try:
            self.setup(await request.json())
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return JSONResponse({"message": f"bad setup: {exc!r}"}, status_code=400)
        return JSONResponse({"ok": True})

    async def _http_reset(self, request: Request) -> Response:
        self.reset()
        return JSONResponse({"ok": True})

    # ---------------------------------------------------------------------- API
    async def _http_api(self, request: Request) -> Response:
        raw = await request.body()
        path = request.url.path
        prefix = ENTERPRISE_PREFIX if path.startswith(ENTERPRISE_PREFIX + "/") else ""
        api_path = path[len(prefix):]
        target = api_path + (f"?{request.url.query}" if request.url.query else "")
        api_root = f"{request.url.scheme}://{request.url.netloc}{prefix}"
        headers = {k.lower(): v for k, v in request.headers.items()}
        with self._lock:
            record: dict[str, Any] = {"method": request.method, "path": target,
                                      "raw_path": path, "operation": None, "status": None,
                                      "auth": None, "body": None, "fault": False,
                                      "at": time.time()}
            self.model.requests.append(record)
            moved = self.model.moved(request.method, target, api_root)
            if moved is not None:
                status, payload, extra = moved
            else:
                target = record["path"] = self.model.by_id(target)
                status, payload, extra = self._process(request.method, target, raw, headers,
                                                       api_root, record)
            record["status"] = status
            self._persist()
            remaining = max(0, 5000 - len(self.model.requests))
        out_headers = {"date": formatdate(self.model.now(), usegmt=True),
                       "x-ratelimit-limit": "5000", "x-ratelimit-remaining": str(remaining),
                       "x-ratelimit-used": str(5000 - remaining), "x-ratelimit-resource": "core",
                       "x-ratelimit-reset": str(int(time.time()) + 3600),
                       "x-github-request-id": uuid.uuid4().hex[:20].upper(), **extra}
        if isinstance(payload, str):
            return Response(payload, status_code=status, headers=out_headers,
                            media_type=extra.get("content-type", "text/plain"))
        return JSONResponse(payload, status_code=status, headers=out_headers)

    def _violation(self, kind: str, record: dict[str, Any], detail: Any) -> None:
        self.model.violations.append({"kind": kind, "method": record["method"],
                                      "path": record["path"], "operation": record["operation"],
                                      "detail": detail})

    def _process(self, method: str, target: str, raw: bytes, headers: dict[str, str],
                 api_root: str, record: dict[str, Any]) -> Answer:
        v = self._validate
        try:
            ep, params, query = self._subset.match(method, target)
        except v.UnknownEndpointError as exc:
            self._violation("unknown_endpoint", record, str(exc))
            return _error(404, "Not Found")
        record["operation"] = op = ep["operationId"]
        try:
            body = json.loads(raw) if raw else None
        except ValueError as exc:
            self._violation("invalid_json", record, str(exc))
            return _error(400, "Problems parsing JSON")
        record["body"] = body
        problems: list[str] = []
        try:
            self._subset.validate_request(method, target, body, strict=True)
        except v.RequestValidationError as exc:
            problems = list(exc.problems)
            self._violation("invalid_request", record, problems)
        if not headers.get("user-agent"):
            self._violation("no_user_agent", record, "GitHub refuses requests without one")
            return _error(403, "Request forbidden by administrative rules. Please make sure "
                               "your request has a User-Agent header")
        auth_problem = self._authenticate(op, headers, record)
        if auth_problem is not None:
            self._violation("auth", record, auth_problem)
            return _error(401, auth_problem)
        if problems:
            return self._validation_failed(ep, problems)
        too_long = over_byte_limit(op, body)
        if too_long:
            self._violation("too_long", record, [e["message"] for e in too_long])
            return 422, {"message": "Validation Failed", "errors": too_long,
                         "documentation_url": ep.get("docs_url") or DOCS, "status": "422"}, {}
        now = time.time()
        fault = faults.take_fault(self.model.faults, method, target.split("?", 1)[0], op, now,
                                  body)
        if fault is not None:
            record.update(fault=True, fault_after=fault.after)
            if fault.revoke and record["auth"] == "token":
                self.model.revoke(headers.get("authorization", "").partition(" ")[2].strip())
            if not fault.after:
                return fault.answer
        limited = self.model.limits.check(
            None if record["auth"] == "jwt" else str(record.get("installation_id")),
            method, op, now)
        if limited is not None:
            self._violation("secondary_rate_limit", record, limited[0])
            return faults.secondary_answer(limited[1])
        ctx = Ctx(params=params, query=query, body=body, api_root=api_root, headers=headers)
        answer = self._handle(method, target, op, ctx, record)
        return fault.answer if fault is not None else answer

    def _handle(self, method: str, target: str, op: str, ctx: Ctx,
                record: dict[str, Any]) -> Answer:
        try:
            if op in self._lists:
                lister, wrap_key = self._lists[op]
                answer = self._paginate(lister(ctx), ctx, target.split("?", 1)[0], wrap_key)
            else:
                answer = self._handlers[op](ctx)
        except NotFound as exc:
            if not exc.expected:
                self._violation("not_found", record, str(exc))
            return _error(404, "Not Found")
        status, payload, _ = answer
        if not isinstance(payload, str):
            try:
                self._subset.validate_response(method, target, status, payload)
            except self._validate.RequestValidationError as exc:
                self._violation("invalid_response", record, exc.problems)
        return answer

    @staticmethod
    def _validation_failed(ep: dict[str, Any], problems: list[str]) -> Answer:
        resource = ep["operationId"].split("/", 1)[-1]
        errors = [{"resource": resource, "code": "invalid",
                   "field": p.split(":", 1)[0], "message": p} for p in problems]
        return 422, {"message": "Validation Failed", "errors": errors,
                     "documentation_url": ep.get("docs_url") or DOCS, "status": "422"}, {}

    def _authenticate(self, op: str, headers: dict[str, str],
                      record: dict[str, Any]) -> str | None:
        scheme, _, credential = headers.get("authorization", "").partition(" ")
        credential = credential.strip()
        if op in oauth.USER_OPERATIONS:
            return self.oauth.authenticate(op, headers, record)
        if op in JWT_OPERATIONS:
            record["auth"] = "jwt"
            if scheme.lower() != "bearer" or not credential:
                return "A JSON web token is required: Authorization: Bearer <JWT>"
            return self._check_jwt(credential)
        record["auth"] = "token"
        if scheme.lower() not in ("token", "bearer") or not credential:
            return "Requires authentication"
        installation_id = self.model.token_installation(credential)
        if installation_id is None:
            return "Bad credentials"
        record["installation_id"] = installation_id
        return None

    def _check_jwt(self, token: str) -> str | None:
        key, app_id = self.model.config["public_key_pem"], self.model.config["app_id"]
        if not key or not app_id:
            return "the fake has no app_id/public_key_pem: POST them to /_fake/setup"
        try:  # the times are checked below, by the fake's clock
            claims = jwt.decode(token, key, algorithms=["RS256"],
                                options={"require": ["iat", "exp", "iss"], "verify_exp": False,
                                         "verify_iat": False, "verify_nbf": False})
        except jwt.PyJWTError as exc:
            return f"A JSON web token could not be decoded: {exc}"
        if str(claims["iss"]) != app_id:
            return f"'Issuer' claim ('iss') {claims['iss']!r} is not the App id {app_id!r}"
        now = self.model.now()
        if not isinstance(claims["iat"], int) or claims["iat"] > now:
            return IAT_IN_FUTURE
        if claims["exp"] - claims["iat"] > MAX_JWT_LIFETIME_S or \
                claims["exp"] > now + MAX_JWT_EXP_AHEAD_S:
            return EXP_TOO_FAR
        if claims["exp"] <= now:
            return EXP_PASSED
        return None

    @staticmethod
    def _paginate(items: list[Any], ctx: Ctx, api_path: str, wrap_key: str | None) -> Answer:
        per_page = int(ctx.query.get("per_page", "30"))
        page = max(1, int(ctx.query.get("page", "1")))
        last = max(1, math.ceil(len(items) / per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        payload = {"total_count": len(items), wrap_key: chunk} if wrap_key else chunk

        def url(n: int) -> str:
            query = {**ctx.query, "per_page": str(per_page), "page": str(n)}
            return f"{ctx.api_root}{api_path}?{urlencode(query)}"

        links = [f'<{url(page - 1)}>; rel="prev"'] if page > 1 else []
        if page < last:
            links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
        if page > 1:
            links.append(f'<{url(1)}>; rel="first"')
        return 200, payload, ({"link": ", ".join(links)} if links else {})


# ------------------------------------------------------------------- serving it
def _listen(sock: socket.socket, port: int) -> None:
    """Bind and listen on 127.0.0.1 (connections queue before uvicorn accepts them).

    TCP_NODELAY, inherited by accepted sockets, avoids a 40 ms Nagle/delayed-ACK stall on every
    keep-alive request.
    """
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)


class FakeGitHubServer:
    """Serve a ``FakeGitHub`` with uvicorn on 127.0.0.1 from a background thread."""

    def __init__(self, fake: FakeGitHub | None = None, port: int = 0) -> None:
        self.fake = fake or FakeGitHub()
        self._sock = socket.socket()
        _listen(self._sock, port)
        self.port = int(self._sock.getsockname()[1])
        config = uvicorn.Config(self.fake.app, log_level="warning", access_log=False,
                                lifespan="off", loop="asyncio", date_header=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run,
                                        kwargs={"sockets": [self._sock]}, daemon=True)

    @property
    def url(self) -> str:
        """The API root, ``http://127.0.0.1:PORT`` (like ``https://api.github.com``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def enterprise_url(self) -> str:
        """The same API under ``/api/v3``, as GitHub Enterprise Server serves it."""
        return self.url + ENTERPRISE_PREFIX

    def start(self, timeout_s: float = 10.0) -> None:
        """Start serving; raise RuntimeError if uvicorn is not up within ``timeout_s``."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake GitHub server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def setup(self, cfg: dict[str, Any]) -> None:
        """See ``FakeGitHub.setup``."""
        self.fake.setup(cfg)

    def state(self) -> dict[str, Any]:
        """See ``FakeGitHub.state``."""
        return self.fake.state()


@contextmanager
def running_fake_github(config: dict[str, Any] | None = None) -> Iterator[FakeGitHubServer]:
    """Serve a fresh fake on a free loopback port for the duration of the block."""
    server = FakeGitHubServer(FakeGitHub(config))
    server.start()
    try:
        yield server
    finally:
        server.stop()


class FakeGitHubRemote:
    """Drive a fake GitHub running in another process through its control endpoints."""

    def __init__(self, url: str, process: subprocess.Popen[bytes] | None = None) -> None:
        self.url = url.rstrip("/")
        self.process = process

    def setup(self, cfg: dict[str, Any]) -> None:
        """POST ``cfg`` to ``/_fake/setup``; raise on refusal."""
        httpx.post(f"{self.url}/_fake/setup", json=cfg, timeout=10).raise_for_status()

    def state(self) -> dict[str, Any]:
        """GET ``/_fake/state``."""
        resp = httpx.get(f"{self.url}/_fake/state", timeout=10)
        resp.raise_for_status()
        data: dict[str, Any] = resp.json()
        return data

    def reset(self) -> None:
        """POST ``/_fake/reset``."""
        httpx.post(f"{self.url}/_fake/reset", timeout=10).raise_for_status()


@contextmanager
def running_fake_github_process(workdir: Path, config: dict[str, Any] | None = None,
                                timeout_s: float = 20.0) -> Iterator[FakeGitHubRemote]:
    """Run the fake as ``python -m tests.fakes.fake_github`` in ``workdir``; yield its remote.

    The state is also written to ``workdir / "fake-github-state.json"`` after every request.
    """
    ready = workdir / "fake-github-ready.json"
    setup_file = workdir / "fake-github-setup.json"
    setup_file.write_text(json.dumps(config or {}))
    cmd = [sys.executable, "-m", "tests.fakes.fake_github", "--port", "0",
           "--ready-file", str(ready), "--setup-file", str(setup_file),
           "--state-file", str(workdir / "fake-github-state.json")]
    repo_root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(cmd, cwd=repo_root)
    try:
        deadline = time.monotonic() + timeout_s
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"fake GitHub process did not start (exit {proc.poll()})")
            time.sleep(0.05)
        yield FakeGitHubRemote(json.loads(ready.read_text())["url"], proc)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main(argv: list[str] | None = None) -> None:
    """Command line: serve the fake until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--setup-file", type=Path, help="JSON applied as /_fake/setup")
    parser.add_argument("--state-file", type=Path, help="rewritten after every request")
    parser.add_argument("--ready-file", type=Path, help='gets {"url", "port", "pid"} once up')
    parser.add_argument("--app-id")
    parser.add_argument("--public-key-file", type=Path)
    args = parser.parse_args(argv)
    fake = FakeGitHub(state_file=args.state_file)
    cfg = json.loads(args.setup_file.read_text()) if args.setup_file else {}
    if args.app_id:
        cfg["app_id"] = args.app_id
    if args.public_key_file:
        cfg["public_key_pem"] = args.public_key_file.read_text()
    fake.setup(cfg)
    sock = socket.socket()
    _listen(sock, args.port)
    port = int(sock.getsockname()[1])
    info = json.dumps({"url": f"http://127.0.0.1:{port}", "port": port, "pid": os.getpid()})
    server = uvicorn.Server(uvicorn.Config(fake.app, log_level="warning", access_log=False,
                                           lifespan="off", loop="asyncio", date_header=False))
    if args.ready_file:
        fd, tmp = tempfile.mkstemp(dir=args.ready_file.parent)
        with os.fdopen(fd, "w") as f:
            f.write(info)
        os.replace(tmp, args.ready_file)
    print(info, flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
