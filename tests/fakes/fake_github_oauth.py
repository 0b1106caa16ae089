"""The fake GitHub's side of "Sign in with GitHub": the OAuth web flow and the user's REST view.

Registered by ``fake_github.FakeGitHub`` (one hook each in its routes, handlers, lists,
authentication, setup and state). Configured by ``/_fake/setup`` key ``oauth``, merged:
``{client_id, client_secret, callback_url?, authorize_as, users: {login: {id, installations:
{installation_id: ["owner/repo", ...]}}}, repos: {"owner/repo": {private}}, expires_in?}``.

The OAuth endpoints are not in GitHub's REST description; they are checked by GitHub's
documented rules ("Authorizing OAuth apps", web application flow; "Generating a user access
token for a GitHub App"; "Troubleshooting OAuth app access token request errors"; the PKCE
changelog of 2025-07-14; RFC 7636), and every refusal is a violation of kind ``oauth``:

- ``GET /login/oauth/authorize``: ``client_id`` must be the App's; ``redirect_uri``, when
  given, must have the callback URL's host and port and a path at or under its path;
  ``code_challenge_method`` must be ``S256`` ("Only the S256 code challenge method is
  accepted") and ``code_challenge`` 43 base64url characters. No HTML: the user
  ``authorize_as`` consents at once and the answer is a 302 to ``redirect_uri`` (else the
  callback URL) with ``code`` and ``state``.
- ``POST /login/oauth/access_token`` (form or JSON): wrong client id/secret:
  ``incorrect_client_credentials``; a ``redirect_uri`` other than the authorize request's:
  ``redirect_uri_mismatch``; a code unknown, used, older than 10 minutes, or whose
  ``code_verifier`` does not hash (S256) to its challenge: ``bad_verification_code``. GitHub
  answers these errors with status 200. A success is ``{access_token: "ghu_…", token_type:
  "bearer", scope: ""}`` (+ ``expires_in`` when configured), as JSON only with ``Accept:
  application/json`` (else form-encoded, as GitHub).

The REST endpoints (``/user``, ``/user/installations``,
``/user/installations/{installation_id}/repositories``, ``/repos/{owner}/{repo}``) are
validated against ``rest-subset.json`` by ``FakeGitHub`` like every other; the first three need
a live ``ghu_`` token (401 "Bad credentials" otherwise); ``/repos/{owner}/{repo}`` needs none
and answers 404 for a private repository unless the token's user can read it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from tests.fakes.fake_github_model import Answer, Ctx, FakeModel, NotFound

#: The REST operations a user-to-server token (or nothing) authenticates.
USER_OPERATIONS = frozenset({"users/get-authenticated",
                             "apps/list-installations-for-authenticated-user",
                             "apps/list-installation-repos-for-authenticated-user",
                             "repos/get"})
#: GitHub's codes expire after 10 minutes.
CODE_TTL_S = 600
_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")
_VERIFIER = re.compile(r"[A-Za-z0-9._~-]{43,128}")
_ERRORS = {
    "incorrect_client_credentials": "The client_id and/or client_secret passed are incorrect.",
    "redirect_uri_mismatch": "The redirect_uri MUST match the registered callback URL for "
                             "this application.",
    "bad_verification_code": "The code passed is incorrect or expired.",
}


def _defaults() -> dict[str, Any]:
    return {"client_id": "Iv23fakeclient", "client_secret": "fake-client-secret",
            "callback_url": None, "authorize_as": None, "users": {}, "repos": {},
            "expires_in": None}


class OAuthFake:
    """Codes and user tokens issued, and the answers of the user's endpoints."""

    def __init__(self, model: FakeModel, lock: threading.Lock,
                 persist: Callable[[], None]) -> None:
        """Share ``model`` (requests, violations, examples) and ``lock`` with the fake."""
        self.model, self._lock, self._persist = model, lock, persist
        self.config = _defaults()
        self.codes: dict[str, dict[str, Any]] = {}
        self.tokens: dict[str, dict[str, Any]] = {}

    # ------------------------------------------------------------------ control
    def setup(self, cfg: dict[str, Any]) -> None:
        """Merge ``cfg["oauth"]`` into the configuration; ``reset_config`` restores it."""
        if cfg.get("reset_config"):
            self.config = _defaults()
        if cfg.get("reset") or cfg.get("reset_config"):
            self.codes.clear()
            self.tokens.clear()
        new = dict(cfg.get("oauth") or {})
        self.config["users"].update(new.pop("users", {}))
        self.config["repos"].update(new.pop("repos", {}))
        self.config.update(new)

    def snapshot(self) -> dict[str, Any]:
        """The configuration, codes and tokens (plain JSON)."""
        return {"config": self.config, "codes": list(self.codes.values()),
                "tokens": [{"token": t, **v} for t, v in self.tokens.items()]}

    def routes(self) -> list[Route]:
        """The two OAuth endpoints, to serve before the REST catch-all."""
        return [Route("/login/oauth/authorize", self._authorize, methods=["GET"]),
                Route("/login/oauth/access_token", self._access_token, methods=["POST"])]

    def handlers(self) -> dict[str, Callable[[Ctx], Answer]]:
        """Handlers of the single-object REST operations."""
        return {"users/get-authenticated": self._get_user, "repos/get": self._get_repo}

    def lists(self) -> dict[str, tuple[Callable[[Ctx], list[Any]], str | None]]:
        """Listers of the paginated REST operations and their wrapping key."""
        return {"apps/list-installations-for-authenticated-user":
                (self._installations, "installations"),
                "apps/list-installation-repos-for-authenticated-user":
                (self._installation_repos, "repositories")}

    def authenticate(self, op: str, headers: dict[str, str],
                     record: dict[str, Any]) -> str | None:
        """Return GitHub's 401 message for ``op``'s credentials, or None when accepted."""
        scheme, _, credential = headers.get("authorization", "").partition(" ")
        credential = credential.strip()
        record["auth"] = "user" if credential else "none"
        if op == "repos/get" and not credential:
            return None
        if scheme.lower() not in ("token", "bearer") or not credential:
            return "Requires authentication"
        info = self.tokens.get(credential)
        if info is None or info.get("revoked") or (
                info["expires_at"] is not None and info["expires_at"] <= time.time()):
            if op == "repos/get" and self.model.token_installation(credential) is not None:
                return None
            return "Bad credentials"
        record["user_login"] = info["login"]
        return None

    # ------------------------------------------------------------------ OAuth
    def _refuse(self, record: dict[str, Any], detail: str) -> None:
        self.model.violations.append({"kind": "oauth", "method": record["method"],
                                      "path": record["path"],
                                      "operation": record["operation"], "detail": detail})

    def _record(self, request: Request, operation: str, body: Any) -> dict[str, Any]:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        record = {"method": request.method, "path": target, "raw_path": request.url.path,
                  "operation": operation, "status": None, "auth": None, "body": body,
                  "fault": False, "at": time.time()}
        self.model.requests.append(record)
        return record

    async def _authorize(self, request: Request) -> Response:
        query = dict(request.query_params)
        with self._lock:
            record = self._record(request, "oauth/authorize", None)
            problem = self._authorize_problem(query)
            if problem is not None:
                self._refuse(record, problem)
                record["status"] = 400
                self._persist()
                return PlainTextResponse(problem, status_code=400)
            code = secrets.token_hex(10)
            target = query.get("redirect_uri") or self.config["callback_url"]
            self.codes[code] = {"code": code, "login": self.config["authorize_as"],
                                "redirect_uri": query.get("redirect_uri"),
                                "challenge": query.get("code_challenge"),
                                "expires_at": time.time() + CODE_TTL_S, "used": False}
            record["status"] = 302
            self._persist()
        params = {"code": code, **({"state": query["state"]} if "state" in query else {})}
        sep = "&" if urlsplit(target).query else "?"
        return RedirectResponse(f"{target}{sep}{urlencode(params)}", status_code=302)

    def _authorize_problem(self, query: dict[str, str]) -> str | None:
        if query.get("client_id") != self.config["client_id"]:
            return "client_id is missing or not this App's"
        if self.config["authorize_as"] not in self.config["users"]:
            return "the fake has no user to authorize as: set oauth.authorize_as and users"
        redirect = query.get("redirect_uri")
        if redirect is None and not self.config["callback_url"]:
            return "no redirect_uri and no callback URL configured"
        if redirect is not None and not _under_callback(redirect, self.config["callback_url"]):
            return "redirect_uri_mismatch: not under the App's callback URL"
        if "code_challenge" in query:
            if query.get("code_challenge_method") != "S256":
                return "code_challenge_method must be S256 (the only method GitHub accepts)"
            if not _CHALLENGE.fullmatch(query["code_challenge"]):
                return "code_challenge must be 43 base64url characters (SHA-256, RFC 7636)"
        return None

    async def _access_token(self, request: Request) -> Response:
        raw = (await request.body()).decode("utf-8", "replace")
        json_body = request.headers.get("content-type", "").startswith("application/json")
        form = dict(_json_or_form(raw, json_body))
        shown = {k: ("***" if k in ("client_secret", "code_verifier") else v)
                 for k, v in form.items()}
        with self._lock:
            record = self._record(request, "oauth/access_token", shown)
            error = self._exchange_problem(form)
            if error is None:
                code = self.codes[form["code"]]
                code["used"] = True
                token = "ghu_" + secrets.token_hex(18)
                expires_in = self.config["expires_in"]
                self.tokens[token] = {"login": code["login"], "revoked": False,
                                      "expires_at": time.time() + expires_in
                                      if expires_in else None}
                payload: dict[str, Any] = {"access_token": token, "token_type": "bearer",
                                           "scope": ""}
                if expires_in:
                    payload["expires_in"] = int(expires_in)
            else:
                self._refuse(record, error)
                payload = {"error": error, "error_description": _ERRORS[error],
                           "error_uri": "https://docs.github.com/apps/oauth-apps/"}
            record["status"] = 200
            self._persist()
        if "json" in request.headers.get("accept", ""):
            return JSONResponse(payload)
        return PlainTextResponse(urlencode(payload),
                                 media_type="application/x-www-form-urlencoded")

    def _exchange_problem(self, form: dict[str, str]) -> str | None:
        if form.get("client_id") != self.config["client_id"] or not hmac.compare_digest(
                form.get("client_secret", "").encode(), self.config["client_secret"].encode()):
            return "incorrect_client_credentials"
        code = self.codes.get(form.get("code", ""))
        if code is None or code["used"] or code["expires_at"] <= time.time():
            return "bad_verification_code"
        if "redirect_uri" in form and code["redirect_uri"] is not None and \
                form["redirect_uri"] != code["redirect_uri"]:
            return "redirect_uri_mismatch"
        verifier = form.get("code_verifier")
        if code["challenge"] is not None:
            if verifier is None or not _VERIFIER.fullmatch(verifier):
                return "bad_verification_code"
            digest = hashlib.sha256(verifier.encode()).digest()
            if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != code["challenge"]:
                return "bad_verification_code"
        return None

    # ------------------------------------------------------------------- REST
    def _user_of(self, ctx: Ctx) -> tuple[str, dict[str, Any]] | None:
        credential = ctx.headers.get("authorization", "").partition(" ")[2].strip()
        info = self.tokens.get(credential)
        if info is None:
            return None
        return info["login"], self.config["users"][info["login"]]

    def _get_user(self, ctx: Ctx) -> Answer:
        found = self._user_of(ctx)
        assert found is not None  # authenticate() let only live user tokens through
        login, user = found
        out = self.model.ex.get("users/get-authenticated", "200")
        out.update(login=login, id=int(user["id"]), url=f"{ctx.api_root}/users/{login}",
                   html_url=f"https://github.com/{login}")
        return 200, out, {}

    def _installations(self, ctx: Ctx) -> list[Any]:
        found = self._user_of(ctx)
        assert found is not None
        template = self.model.ex.get("apps/list-installations-for-authenticated-user", "200")
        first = template["installations"][0]
        out = []
        for installation_id in found[1].get("installations", {}):
            inst = dict(first, id=int(installation_id), app_slug=self.model.config["app_slug"])
            out.append(inst)
        return out

    def _installation_repos(self, ctx: Ctx) -> list[Any]:
        found = self._user_of(ctx)
        assert found is not None
        names = found[1].get("installations", {}).get(str(ctx.params["installation_id"]))
        if names is None:
            raise NotFound(f"installation {ctx.params['installation_id']} is not the user's")
        return [self._repo_json(name) for name in names]

    def _repo_json(self, full_name: str) -> dict[str, Any]:
        template = self.model.ex.get("apps/list-installation-repos-for-authenticated-user",
                                     "200")["repositories"][0]
        owner, name = full_name.split("/")
        private = bool(self.config["repos"].get(full_name, {}).get("private", True))
        template["owner"]["login"] = owner
        template.update(name=name, full_name=full_name, private=private,
                        visibility="private" if private else "public",
                        html_url=f"https://github.com/{full_name}")
        return dict(template)

    def _get_repo(self, ctx: Ctx) -> Answer:
        full_name = f"{ctx.params['owner']}/{ctx.params['repo']}"
        known = {k.lower(): k for k in self.config["repos"]}
        if full_name.lower() not in known:
            raise NotFound(f"repository {full_name} is not configured", expected=True)
        full_name = known[full_name.lower()]
        private = bool(self.config["repos"][full_name].get("private", True))
        found = self._user_of(ctx)
        readable = found is not None and any(
            full_name in names for names in found[1].get("installations", {}).values())
        if private and not readable:
            raise NotFound(f"{full_name} is private", expected=True)
        out = self.model.ex.get("repos/get", "200")
        out.setdefault("language", None)  # the spec's example lacks this required field
        out.get("source", {}).setdefault("language", None)
        owner, name = full_name.split("/")
        out["owner"]["login"] = owner
        out.update(name=name, full_name=full_name, private=private,
                   visibility="private" if private else "public")
        return 200, out, {}


def _under_callback(redirect: str, callback: str | None) -> bool:
    """GitHub's rule: the redirect URL's host and port equal the callback URL's, and its path
    is the callback's or under it; with no callback configured any http(s) URL passes."""
    parts = urlsplit(redirect)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False
    if not callback:
        return True
    registered = urlsplit(callback)
    base = registered.path.rstrip("/")
    return (parts.hostname, parts.port) == (registered.hostname, registered.port) and (
        parts.path == registered.path or parts.path.startswith(base + "/"))


def _json_or_form(raw: str, json_body: bool) -> list[tuple[str, str]]:
    if json_body:
        data = json.loads(raw or "{}")
        return [(str(k), str(v)) for k, v in data.items()] if isinstance(data, dict) else []
    return parse_qsl(raw, keep_blank_values=True)
