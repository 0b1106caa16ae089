"""Authenticate to GitHub: app JWTs, cached installation access tokens, or one given token.

Sources: GitHub docs "Generating a JSON Web Token (JWT) for a GitHub App" (RS256, ``iat`` 60 s in
the past for clock drift, ``exp`` at most 10 minutes ahead, ``iss`` = the App id) and "Generating
an installation access token for a GitHub App" (``POST /app/installations/{id}/access_tokens``,
tokens live one hour and have no fixed length). Neither the private key nor a token ever appears
in a ``repr`` or a log line.

`GitHubClient` takes its tokens from a `TokenSource`: the App's `InstallationTokenCache`, or
`FixedToken` for a token someone else minted (a GitHub Actions workflow's ``GITHUB_TOKEN``,
itself an installation token of the GitHub Actions app, used by ``llmgate action --comment``).

JWTs are signed by an `AppClock`: this machine's clock, corrected by GitHub's. A machine whose
clock runs more than 60 s ahead gets every JWT refused (401 "'Issued at' claim ('iat') must be
an Integer representing a time in the past", or "'Expiration time' claim ('exp') is too far in
the future"); the transport then asks the clock to adopt the offset of the ``Date`` header of
that answer and sends the request again once with a JWT signed anew (`AppClock.correct`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import gidgethub.abc
import jwt
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from worker.github.token_store import SharedTokenStore

#: Seconds ``iat`` is backdated to absorb clock drift (GitHub's docs recommend 60).
JWT_BACKDATE_S = 60
#: Lifetime of an app JWT measured from ``iat``; GitHub refuses ``exp`` more than 10 minutes ahead.
JWT_LIFETIME_S = 600
#: A cached installation token is replaced this many seconds before its ``expires_at``.
TOKEN_REFRESH_MARGIN_S = 300
#: Words of GitHub's 401 answers to a JWT refused for its time claims (``iat``, ``exp``).
_CLOCK_REFUSAL = re.compile(r"'(iat|exp)'|issued at|expiration time", re.IGNORECASE)

log = logging.getLogger(__name__)


def machine_time() -> float:
    """Return this machine's clock, Unix seconds: what an `AppClock` corrects (tests move it)."""
    return time.time()


def is_clock_refusal(message: str) -> bool:
    """Return whether GitHub's message refusing an App JWT (401) is about its time claims.

    E.g. "'Issued at' claim ('iat') must be an Integer representing a time in the past" or
    "'Expiration time' claim ('exp') is too far in the future"; not "A JSON web token could
    not be decoded" (a wrong key) nor an ``iss`` refusal (a wrong App id).
    """
    return bool(_CLOCK_REFUSAL.search(message))


class AppClock:
    """The time App JWTs are signed at: this machine's clock plus the offset GitHub's showed.

    The offset starts at 0 and is set by `correct` when GitHub refuses a JWT for its time; it
    is logged once per clock (one per worker process: `InstallationTokenCache.app_clock`).
    """

    def __init__(self, local: Callable[[], float] | None = None) -> None:
        """Read ``local`` (Unix seconds; default `machine_time`) and add the offset to it."""
        self._local = local
        self.offset_s = 0.0
        self._logged = False

    def __repr__(self) -> str:
        return f"AppClock(offset_s={self.offset_s:+.0f})"

    def now(self) -> int:
        """Return the corrected time, whole Unix seconds (GitHub's clock, as far as known)."""
        local = self._local() if self._local is not None else machine_time()
        return int(local + self.offset_s)

    def correct(self, server_date: str | None) -> bool:
        """Adopt the offset between GitHub's ``Date`` header and this machine's clock.

        Args:
            server_date: the ``Date`` header (RFC 9110 HTTP date, 1 s resolution) of GitHub's
                answer refusing a JWT for its time.

        Returns:
            False when there is no usable date (the refusal stands); True otherwise.
        """
        try:
            server_s = parsedate_to_datetime(server_date or "").timestamp()
        except (TypeError, ValueError, IndexError):
            return False
        local = self._local() if self._local is not None else machine_time()
        self.offset_s = server_s - local
        if not self._logged:
            self._logged = True
            log.warning("GitHub refused an App JWT for its time: this machine's clock is %.0f s "
                        "%s of GitHub's; JWTs are signed by GitHub's time from now on (fix the "
                        "clock, e.g. with NTP)", abs(self.offset_s),
                        "ahead" if self.offset_s < 0 else "behind")
        return True


class GitHubAuthError(Exception):
    """The App could not authenticate: a bad private key, an unusable token response, or a
    client holding no App credentials asked for an App JWT."""


class TokenSource(Protocol):
    """Where `GitHubClient` gets the token of its ``/repos`` calls (``Authorization: token X``).

    `InstallationTokenCache` mints and caches installation tokens as the App; `FixedToken`
    hands out one token it was given.
    """

    async def get(self, gh: gidgethub.abc.GitHubAPI, installation_id: int) -> str:
        """Return a token valid for ``installation_id``.

        Args:
            gh: a gidgethub client whose ``base_url`` is the API root (to mint with).
            installation_id: the App installation to act as (a fixed token ignores it).

        Raises:
            GitHubAuthError: no usable token can be had.
            gidgethub.HTTPException: GitHub refused to mint one.
        """
        ...

    async def invalidate(self, installation_id: int, token: str | None = None) -> None:
        """Forget ``token`` (any token of ``installation_id`` when None): GitHub answered 401."""
        ...


@dataclass(frozen=True)
class FixedToken:
    """A `TokenSource` of one token minted elsewhere, e.g. a workflow's ``GITHUB_TOKEN``.

    Nothing is minted or refreshed: a token GitHub refuses (401) stays refused. The token
    never appears in a ``repr``.

    Attributes:
        token: the token, sent as ``Authorization: token <token>``; any length, not empty.
    """

    token: str = field(repr=False)

    def __post_init__(self) -> None:
        if not self.token:
            raise GitHubAuthError("the given GitHub token is empty")

    def __repr__(self) -> str:
        return "FixedToken(token='***')"

    async def get(self, gh: gidgethub.abc.GitHubAPI, installation_id: int) -> str:
        """Return the token, whatever the installation (`TokenSource.get`)."""
        return self.token

    async def invalidate(self, installation_id: int, token: str | None = None) -> None:
        """Do nothing: there is no other token to mint (`TokenSource.invalidate`)."""


@dataclass(frozen=True)
class AppCredentials:
    """The GitHub App's identity.

    Attributes:
        app_id: the App id (digits, e.g. ``"123456"``) or its Client ID; sent as the JWT ``iss``.
        private_key: the App's PEM private key (PKCS#1 or PKCS#8). Never shown by ``repr``.
    """

    app_id: str
    private_key: str = field(repr=False)

    def __repr__(self) -> str:
        return f"AppCredentials(app_id={self.app_id!r}, private_key='***')"


def app_jwt(creds: AppCredentials, now: int | None = None) -> str:
    """Return an RS256 JWT that authenticates as the App for the ``/app`` endpoints.

    Claims, in this order: ``iat`` = now - 60 s, ``exp`` = iat + 600 s (so it expires 9 minutes
    after ``now``, inside GitHub's 10-minute maximum), ``iss`` = ``creds.app_id`` as a string
    (PyJWT refuses an integer ``iss``; GitHub accepts either).

    Args:
        creds: the App id and private key.
        now: the current Unix time in seconds; ``time.time()`` when omitted.

    Returns:
        The compact JWS ``header.payload.signature``.

    Raises:
        GitHubAuthError: the private key is not a usable RSA PEM key.
    """
    issued_at = (int(time.time()) if now is None else now) - JWT_BACKDATE_S
    claims = {"iat": issued_at, "exp": issued_at + JWT_LIFETIME_S, "iss": str(creds.app_id)}
    try:
        return jwt.encode(claims, _signing_key(creds.private_key), algorithm="RS256")
    except (ValueError, TypeError, UnsupportedAlgorithm, jwt.PyJWTError) as exc:
        raise GitHubAuthError(
            "the GitHub App private key is not a valid RSA PEM key; download a new one from the "
            "App's settings page"
        ) from exc


@functools.lru_cache(maxsize=4)
def _signing_key(pem: str) -> RSAPrivateKey:
    """The App key parsed once per process (issue 34): PyJWT given the PEM text parses it at
    every JWT, and loading an RSA key checks it (about 2 ms idle, 150 ms on a loaded machine;
    signing with the parsed key takes about 2 ms).

    Raises:
        ValueError, TypeError, UnsupportedAlgorithm: not a PEM private key (cryptography's), or
            not an RSA one (TypeError: GitHub signs Apps' JWTs with RS256 only).
    """
    key = load_pem_private_key(pem.encode(), password=None)
    if not isinstance(key, RSAPrivateKey):
        raise TypeError(f"the App key is {type(key).__name__}, not an RSA key")
    return key


def api_url(base_url: str, path: str) -> str:
    """Join an API root (``https://api.github.com`` or ``https://HOST/api/v3``) and a path.

    The result is absolute, so every gidgethub version keeps the Enterprise ``/api/v3`` prefix
    (``urljoin`` alone would drop it for a path starting with ``/``).
    """
    return base_url.rstrip("/") + "/" + path.lstrip("/")


@dataclass(frozen=True)
class _CachedToken:
    token: str = field(repr=False)
    refresh_at: float

    def __repr__(self) -> str:
        return f"_CachedToken(token='***', refresh_at={self.refresh_at})"


def _parse_token_response(data: Any, installation_id: int) -> tuple[str, float]:
    """Return ``(token, expires_at as Unix seconds)`` from an access-token response body."""
    token = data.get("token") if isinstance(data, dict) else None
    expires_at = data.get("expires_at") if isinstance(data, dict) else None
    if not isinstance(token, str) or not token or not isinstance(expires_at, str):
        raise GitHubAuthError(
            f"GitHub's access-token response for installation {installation_id} has no "
            "'token'/'expires_at'"
        )
    try:
        expires_s = datetime.fromisoformat(expires_at.replace("Z", "+00:00")).timestamp()
    except ValueError as exc:
        raise GitHubAuthError(f"unparseable expires_at {expires_at!r} from GitHub") from exc
    return token, expires_s


class InstallationTokenCache:
    """Mint installation access tokens and reuse each until 5 minutes before it expires.

    One cache serves every installation of the App. Concurrent callers of one process share one
    mint (an ``asyncio.Lock`` per installation); with a `SharedTokenStore` the tokens are also
    shared, encrypted, between worker processes, which mint one at a time (a Redis lock).
    Tokens are opaque strings of any length and never appear in a ``repr``.
    """

    def __init__(
        self,
        creds: AppCredentials,
        *,
        refresh_margin_s: float = TOKEN_REFRESH_MARGIN_S,
        clock: Callable[[], float] = time.time,
        shared: SharedTokenStore | None = None,
        app_clock: AppClock | None = None,
    ) -> None:
        """Create an empty cache.

        Args:
            creds: the App credentials used to sign the JWT for each mint.
            refresh_margin_s: seconds before ``expires_at`` at which a token is replaced.
            clock: returns the current Unix time in seconds, for token freshness only
                (injectable for tests).
            shared: the tokens of every worker process (None: this process only).
            app_clock: the clock JWTs are signed at, shared with every `GitHubClient` of this
                cache (default: a new `AppClock` of this machine's time).
        """
        self.app_clock = app_clock or AppClock()
        self._creds = creds
        self._refresh_margin_s = refresh_margin_s
        self._clock = clock
        self._shared = shared
        self._tokens: dict[int, _CachedToken] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    def __repr__(self) -> str:
        return (f"InstallationTokenCache(app_id={self._creds.app_id!r}, "
                f"cached={len(self._tokens)}, shared={self._shared is not None})")

    def _fresh(self, installation_id: int) -> str | None:
        cached = self._tokens.get(installation_id)
        if cached is not None and self._clock() < cached.refresh_at:
            return cached.token
        return None

    async def get(self, gh: gidgethub.abc.GitHubAPI, installation_id: int) -> str:
        """Return a valid installation token, minting one when none is cached or it is stale.

        Args:
            gh: a gidgethub client whose ``base_url`` is the GitHub API root.
            installation_id: the App installation to act as.

        Returns:
            The token, for ``Authorization: token <token>``.

        Raises:
            GitHubAuthError: the key is unusable or GitHub's answer lacks a token.
            gidgethub.HTTPException: GitHub refused the request (e.g. 401 for a wrong App id,
                404 for an unknown installation).
        """
        token = self._fresh(installation_id)
        if token is not None:
            return token
        async with self._locks.setdefault(installation_id, asyncio.Lock()):
            token = self._fresh(installation_id)
            if token is not None:
                return token
            if self._shared is None:
                return await self._mint(gh, installation_id)
            token = await self._from_shared(installation_id)
            if token is not None:
                return token
            async with self._shared.mint_lock(installation_id):
                token = await self._from_shared(installation_id)
                return token if token is not None else await self._mint(gh, installation_id)

    async def _from_shared(self, installation_id: int) -> str | None:
        """Adopt the shared token when it is still fresh."""
        if self._shared is None:
            return None
        stored = await self._shared.get(installation_id)
        if stored is None:
            return None
        token, expires_s = stored
        refresh_at = expires_s - self._refresh_margin_s
        if self._clock() >= refresh_at:
            return None
        self._tokens[installation_id] = _CachedToken(token, refresh_at)
        return token

    async def _mint(self, gh: gidgethub.abc.GitHubAPI, installation_id: int) -> str:
        """Ask GitHub for a token, keep it here (and shared, until it is due for refresh)."""
        data = await gh.post(
            api_url(gh.base_url, "/app/installations/{installation_id}/access_tokens"),
            {"installation_id": installation_id},
            data={},
            jwt=app_jwt(self._creds, self.app_clock.now()),
        )
        token, expires_s = _parse_token_response(data, installation_id)
        refresh_at = expires_s - self._refresh_margin_s
        self._tokens[installation_id] = _CachedToken(token, refresh_at)
        keep_s = refresh_at - self._clock()
        if self._shared is not None and keep_s > 0:
            await self._shared.put(installation_id, token, expires_s, keep_s)
        return token

    async def invalidate(self, installation_id: int, token: str | None = None) -> None:
        """Forget the token of one installation (e.g. after GitHub answered 401).

        With ``token``, only that token is forgotten: another worker may already have minted
        its successor. The shared copy is dropped too.
        """
        cached = self._tokens.get(installation_id)
        if cached is not None and (token is None or cached.token == token):
            del self._tokens[installation_id]
        if self._shared is not None:
            await self._shared.drop(installation_id, token)
