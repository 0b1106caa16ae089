"""Sign-in settings and the two cookies of "Sign in with GitHub": pure, no I/O.

- The **session** cookie (`SESSION_COOKIE`) is ``v1.<payload>.<mac>``: the payload is base64url
  JSON ``{"sid", "uid", "login", "exp", "tok"}`` and ``mac`` its HMAC-SHA256 under a key derived
  from ``LLMGATE_SESSION_SECRET``; ``exp`` (Unix seconds) is inside the signed value, so an old
  cookie replayed after its ``Max-Age`` is refused as well. ``tok`` is the user-to-server token
  encrypted with Fernet (AES-128-CBC + HMAC-SHA256, cryptography.io/en/latest/fernet/) under a
  second derived key: the token is never in the cookie in clear.
- The **sign-in** cookie (`FLOW_COOKIE`) lives for `FLOW_TTL_S` between ``/login`` and
  ``/auth/callback`` and holds, encrypted, the ``state``, the PKCE ``code_verifier`` and where
  to go next: it binds the ``state`` GitHub returns to the browser that asked.

Both keys come from the one secret by HKDF-SHA256 (RFC 5869) with different ``info`` labels.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from app.settings import SettingsError

#: The session cookie; ``__Host-`` makes browsers require Secure, Path=/ and no Domain.
SESSION_COOKIE = "__Host-llmgate-session"
#: The short-lived cookie of one sign-in, sent back only to ``/auth/callback``.
FLOW_COOKIE = "__Secure-llmgate-signin"
FLOW_COOKIE_PATH = "/auth"
#: A session lasts 8 hours (GitHub's expiring user-to-server tokens live as long).
SESSION_TTL_S = 8 * 3600
#: A sign-in must come back from GitHub within 10 minutes (GitHub's codes expire then too).
FLOW_TTL_S = 600
#: Shortest ``LLMGATE_SESSION_SECRET``, in bytes of UTF-8.
MIN_SECRET_BYTES = 32
DEFAULT_GITHUB_URL = "https://github.com"
DEFAULT_API_URL = "https://api.github.com"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")
_MASK = "**********"
_MAX_NEXT = 2000
_SAFE_NEXT = re.compile(r"/(?![/\\])[\x21-\x7e]*")


@dataclass(frozen=True, repr=False)
class AuthSettings:
    """Settings of "Sign in with GitHub" and of who may open what.

    Attributes:
        client_id: ``LLMGATE_GITHUB_CLIENT_ID``, the GitHub App's client id (``Iv1.…``/``Iv23…``).
        client_secret: ``LLMGATE_GITHUB_CLIENT_SECRET``, one of the App's client secrets; never
            shown by ``repr``.
        session_secret: ``LLMGATE_SESSION_SECRET``, at least 32 bytes; the cookies' signing and
            encryption keys are derived from it. Changing it signs everyone out.
        dashboard_public: ``LLMGATE_DASHBOARD_PUBLIC``, public repositories open without sign-in.
        reports_require_login: ``LLMGATE_REPORTS_REQUIRE_LOGIN``, a private repository's
            report needs a signed-in reader.
        github_url: ``GITHUB_URL``, GitHub's web root (``https://github.com`` or
            ``https://HOST`` for GitHub Enterprise Server), where users authorize; when unset,
            ``GITHUB_API_URL`` without its ``/api/v3``, else ``https://github.com``.
        api_url: ``GITHUB_API_URL``, the REST root (as the worker's), e.g.
            ``https://api.github.com`` or ``https://HOST/api/v3``.
        public_url: ``LLMGATE_PUBLIC_URL``, the web process's public root; the callback is
            ``<public_url>/auth/callback`` ("" when unset: taken from the request).

    Raises:
        SettingsError: on construction, when a value is empty or malformed.
    """

    client_id: str
    client_secret: str
    session_secret: str
    dashboard_public: bool = False
    reports_require_login: bool = False
    github_url: str = DEFAULT_GITHUB_URL
    api_url: str = DEFAULT_API_URL
    public_url: str = ""

    def __post_init__(self) -> None:
        """Check every field; raise ``SettingsError`` naming the variable at fault."""
        if not self.client_id.strip():
            raise SettingsError("LLMGATE_GITHUB_CLIENT_ID is not set: set it to the GitHub "
                                "App's client id (App settings, General)")
        if not self.client_secret.strip():
            raise SettingsError("LLMGATE_GITHUB_CLIENT_SECRET is not set: generate a client "
                                "secret in the GitHub App's settings")
        if len(self.session_secret.encode("utf-8")) < MIN_SECRET_BYTES:
            raise SettingsError(f"LLMGATE_SESSION_SECRET must be at least {MIN_SECRET_BYTES} "
                                "bytes, e.g. the output of: openssl rand -hex 32")
        for name, url in (("GITHUB_URL", self.github_url), ("GITHUB_API_URL", self.api_url),
                          ("LLMGATE_PUBLIC_URL", self.public_url)):
            parts = urlsplit(url)
            if (url or name != "LLMGATE_PUBLIC_URL") and (
                    parts.scheme not in ("http", "https") or not parts.netloc):
                raise SettingsError(f"{name} must be an http(s) URL, got {url[:60]!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> AuthSettings | None:
        """Read the settings from ``environ``; None when sign-in is not configured at all
        (none of the client id, client secret and session secret is set).

        Raises:
            SettingsError: only some of the three are set, a value is malformed, or
                ``LLMGATE_REPORTS_REQUIRE_LOGIN`` or ``LLMGATE_DASHBOARD_PUBLIC`` is on
                without sign-in configured (the dashboard exists only with sign-in).
        """
        names = ("LLMGATE_GITHUB_CLIENT_ID", "LLMGATE_GITHUB_CLIENT_SECRET",
                 "LLMGATE_SESSION_SECRET")
        values = [environ.get(name, "") for name in names]
        require = _flag(environ, "LLMGATE_REPORTS_REQUIRE_LOGIN")
        public = _flag(environ, "LLMGATE_DASHBOARD_PUBLIC")
        if not any(v.strip() for v in values):
            for name, on in (("LLMGATE_REPORTS_REQUIRE_LOGIN", require),
                             ("LLMGATE_DASHBOARD_PUBLIC", public)):
                if on:  # a setting that would do nothing: refused, as a typo would be
                    raise SettingsError(f"{name} is on but sign-in is not configured: set "
                                        f"{', '.join(names)}")
            return None
        api_url = _root(environ, "GITHUB_API_URL", DEFAULT_API_URL)
        web_default = api_url.removesuffix("/api/v3") if api_url.endswith("/api/v3") else \
            DEFAULT_GITHUB_URL
        client_id, client_secret, session_secret = values
        return cls(client_id.strip(), client_secret.strip(), session_secret,
                   dashboard_public=public, reports_require_login=require,
                   github_url=_root(environ, "GITHUB_URL", web_default), api_url=api_url,
                   public_url=_root(environ, "LLMGATE_PUBLIC_URL", ""))

    def __repr__(self) -> str:
        """Show the settings with both secrets masked."""
        return (f"AuthSettings(client_id={self.client_id!r}, client_secret={_MASK!r}, "
                f"session_secret={_MASK!r}, dashboard_public={self.dashboard_public}, "
                f"reports_require_login={self.reports_require_login}, "
                f"github_url={self.github_url!r}, api_url={self.api_url!r}, "
                f"public_url={self.public_url!r})")


@dataclass(frozen=True, repr=False)
class SessionUser:
    """A signed-in user: GitHub's numeric ``user_id``, ``login``, the user-to-server
    ``token`` (never shown by ``repr``), the session id ``sid`` and its expiry ``expires_at``
    (Unix seconds)."""

    sid: str
    user_id: int
    login: str
    token: str
    expires_at: int

    def __repr__(self) -> str:
        """Show the user without the token."""
        return f"SessionUser(login={self.login!r}, user_id={self.user_id})"


@dataclass(frozen=True)
class SignInFlow:
    """One sign-in under way: the ``state``, the PKCE ``verifier`` and the ``next`` path."""

    state: str
    verifier: str
    next_path: str


class SessionCodec:
    """Seal and open the session and sign-in cookies under keys derived from one secret."""

    def __init__(self, secret: str) -> None:
        """Derive the signing and encryption keys from ``secret`` (HKDF-SHA256)."""
        self._mac_key = _derive(secret, b"llmgate session mac v1")
        self._fernet = Fernet(base64.urlsafe_b64encode(_derive(secret, b"llmgate token v1")))

    def seal_session(self, user_id: int, login: str, token: str,
                     ttl_s: int = SESSION_TTL_S, now: float | None = None) -> str:
        """Return the session cookie value for a user, valid for ``ttl_s`` seconds."""
        moment = time.time() if now is None else now
        payload = {"sid": secrets.token_urlsafe(12), "uid": user_id, "login": login,
                   "exp": int(moment) + ttl_s,
                   "tok": self._fernet.encrypt(token.encode()).decode()}
        body = _b64(json.dumps(payload, separators=(",", ":")).encode())
        return f"v1.{body}.{self._mac(body)}"

    def open_session(self, value: str | None, now: float | None = None) -> SessionUser | None:
        """Return the user of a session cookie; None when absent, tampered, malformed or
        expired (the token inside must also decrypt)."""
        version, _, rest = (value or "").partition(".")
        body, _, mac = rest.partition(".")
        if version != "v1" or not hmac.compare_digest(mac.encode(), self._mac(body).encode()):
            return None
        try:
            data: dict[str, Any] = json.loads(_unb64(body))
            user = SessionUser(str(data["sid"]), int(data["uid"]), str(data["login"]),
                               self._fernet.decrypt(str(data["tok"]).encode()).decode(),
                               int(data["exp"]))
        except (ValueError, KeyError, TypeError, InvalidToken):
            return None
        return user if user.expires_at > (time.time() if now is None else now) else None

    def seal_flow(self, flow: SignInFlow) -> str:
        """Return the encrypted sign-in cookie value of ``flow``."""
        data = {"state": flow.state, "verifier": flow.verifier, "next": flow.next_path}
        return self._fernet.encrypt(json.dumps(data).encode()).decode()

    def open_flow(self, value: str | None) -> SignInFlow | None:
        """Return the sign-in under way, or None when absent, tampered or older than
        `FLOW_TTL_S`."""
        try:
            data = json.loads(self._fernet.decrypt((value or "").encode(), ttl=FLOW_TTL_S))
            return SignInFlow(str(data["state"]), str(data["verifier"]), str(data["next"]))
        except (InvalidToken, ValueError, KeyError, TypeError):
            return None

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self._mac_key, body.encode(), hashlib.sha256).digest())


def new_flow(next_path: str) -> SignInFlow:
    """Start a sign-in: a 256-bit ``state`` and a 43-character PKCE verifier (RFC 7636 §4.1:
    43-128 characters of ``[A-Za-z0-9-._~]``)."""
    return SignInFlow(secrets.token_urlsafe(32), secrets.token_urlsafe(32), next_path)


def code_challenge(verifier: str) -> str:
    """Return the PKCE S256 challenge: BASE64URL(SHA256(verifier)) without padding (RFC 7636
    §4.2)."""
    return _b64(hashlib.sha256(verifier.encode("ascii")).digest())


def safe_next(value: str | None, default: str = "/") -> str:
    """Return ``value`` when it is a path of this site, else ``default``: no scheme, no host,
    no ``//host`` or ``/\\host`` (browsers read both as another host), no control character,
    no backslash, at most 2000 characters."""
    if not value or len(value) > _MAX_NEXT or "\\" in value or not _SAFE_NEXT.fullmatch(value):
        return default
    parts = urlsplit(value)
    return value if not parts.scheme and not parts.netloc else default


def _flag(environ: Mapping[str, str], name: str) -> bool:
    raw = environ.get(name, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise SettingsError(f"{name} must be true or false (1/0, yes/no, on/off), got {raw[:20]!r}")


def _root(environ: Mapping[str, str], name: str, default: str) -> str:
    return (environ.get(name, "").strip() or default).rstrip("/")


def _derive(secret: str, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(
        secret.encode("utf-8"))


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
