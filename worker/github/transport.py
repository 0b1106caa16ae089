"""gidgethub over ``httpx``: every request waits for its installation's limits, and retries.

Per request (one page of a list included):

1. `GitHubLimiter.acquire` waits out a pause of the installation set by any worker (up to
   ``LLMGATE_GITHUB_MAX_WAIT_S``; a longer one raises `GitHubRateLimited` without sending) and,
   for a POST/PATCH/PUT/DELETE, takes a write slot (see `worker.github.ratelimit`).
2. A rate-limited answer (403/429, see `rate_limit_wait_s`) pauses the installation for every
   worker and is retried after the pause, at most `MAX_RATE_LIMIT_RETRIES` times.
3. A 5xx answer or a connection error is retried after an exponential full-jitter backoff
   (and after its ``retry-after``, if any). Not a create sent under `single_try`: a 5xx, a
   timeout or a connection lost once the request was sent may hide its success (a gateway
   answers 502/504 while GitHub performs the POST), so it raises `GitHubOutcomeUnknown` for
   the caller to look for what it may have created before it sends it again
   (`worker.github.client`); only a request that never left (no connection) is repeated.
4. A refused credential (401) is replaced once per request, through the client's
   `CredentialRenewal`: an installation token GitHub refuses ("Bad credentials": revoked,
   expired early, or lost by GitHub) is dropped everywhere and minted again; an App JWT refused
   for its time (``iat``/``exp``: this machine's clock is off) is signed again at GitHub's time,
   taken from the ``Date`` header of the refusal (`worker.github.auth.AppClock`). A 401 is
   never performed, so repeating it is safe, a create's included. A second 401 goes to
   gidgethub.
5. A redirect of a renamed or transferred repository (301/302/307/308 with a ``Location`` on
   the API's own origin) is repeated verbatim at the new URL, at most `MAX_REDIRECTS` times
   (`worker.github.redirects`; gidgethub itself does not follow redirects).
6. Anything else goes back to gidgethub, which maps it to its exceptions.

Right before each send of a POST/PATCH/PUT/DELETE made with the installation's token (each
resend included), the job's lease is checked (`worker.runtime.fence.guard_write`): a try of a
job whose lease another try holds raises `worker.runtime.fence.LeaseLost` and sends nothing.

A 403 that is not a rate limit (a missing permission) is never retried. Tokens travel only in
headers and never reach a log line, a ``repr`` or an exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

import gidgethub.abc
import httpx

from worker.github.auth import is_clock_refusal
from worker.github.errors import (
    GitHubError,
    GitHubOutcomeUnknown,
    GitHubRateLimited,
    GitHubUnavailable,
    in_seconds,
)
from worker.github.ratelimit import (
    MUTATING_METHODS,
    GitHubLimiter,
    backoff_s,
    rate_limit_wait_s,
    retry_after_s,
)
from worker.github.redirects import MAX_REDIRECTS, redirect_target
from worker.runtime import guard_write, record_github_response

log = logging.getLogger("worker.github.client")

#: User-Agent of every request (GitHub requires one).
REQUESTER = "llmgate"
#: Rate-limited answers of one request retried before `GitHubRateLimited` is raised.
MAX_RATE_LIMIT_RETRIES = 2
#: Connection errors raised before a byte of the request left: repeating it is always safe.
UNSENT_ERRORS: tuple[type[httpx.TransportError], ...] = (httpx.ConnectError,
                                                         httpx.ConnectTimeout, httpx.PoolTimeout)
_SINGLE_TRY: ContextVar[bool] = ContextVar("llmgate_github_single_try", default=False)


@contextlib.contextmanager
def single_try() -> Iterator[None]:
    """Send the mutating requests of this block at most once where they may have been
    performed: a 5xx answer or a connection error after sending raises `GitHubOutcomeUnknown`
    instead of a blind retry (rate limits and unsent requests are still retried)."""
    token = _SINGLE_TRY.set(True)
    try:
        yield
    finally:
        _SINGLE_TRY.reset(token)


class CredentialRenewal(Protocol):
    """How the transport replaces a credential GitHub refused with 401 (once per request)."""

    async def replace_token(self, refused: str) -> str | None:
        """Drop the installation token ``refused`` everywhere and return a fresh one, or None
        when there is no other to be had (a given token: `worker.github.auth.FixedToken`).

        Raises:
            GitHubError, GitHubAuthError: minting the new one failed.
        """
        ...

    def resign_jwt(self, server_date: str | None) -> str | None:
        """Return an App JWT signed anew at the time of ``server_date`` (the ``Date`` header
        of GitHub's refusal), or None when none can be made (no date, no App key)."""
        ...


@dataclass
class _Tries:
    """What happened so far to one request."""

    what: str
    bucket: str
    failures: int = 0  # 5xx answers and connection errors
    limit_hits: int = 0  # rate-limited answers
    status: int | None = None  # the status that caused the last wait
    server_error: bool = False  # the last wait was a 5xx's retry-after, not a rate limit
    single: bool = False  # a create under `single_try`: never repeated once it may have acted
    renewed: bool = False  # its credential was refused once and replaced


class LimitedHttpxAPI(gidgethub.abc.GitHubAPI):
    """gidgethub over ``httpx.AsyncClient`` with shared limits, backoff and retries."""

    def __init__(self, session: httpx.AsyncClient, api_root: str, delays_s: Sequence[float],
                 installation: str = "-", limiter: GitHubLimiter | None = None) -> None:
        """Send through ``session``.

        Args:
            api_root: the API root URL (gidgethub's ``base_url``).
            delays_s: backoff ceilings, seconds: retry ``i`` of a 5xx or connection error
                sleeps uniformly in ``[0, delays_s[i]]``; the length is the number of retries.
            installation: the installation id as text (metrics label and limit bucket).
            limiter: shared pauses and write pacing (default: this client's own, in memory).
        """
        super().__init__(REQUESTER, base_url=api_root)
        self._session = session
        self._api_root = api_root
        self._delays_s = tuple(delays_s)
        self._installation = installation
        self.limiter = limiter or GitHubLimiter()
        #: Replaces a refused token or JWT (set by `worker.github.client.GitHubClient`).
        self.renewal: CredentialRenewal | None = None

    @property
    def bucket(self) -> str:
        """The limit bucket of this installation's requests, ``installation:<id>``."""
        return f"installation:{self._installation}"

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> tuple[int, Mapping[str, str], bytes]:
        """Send one request under the limits, following GitHub's redirects of a moved
        repository on the API's own origin (`worker.github.redirects`); see the module
        docstring.

        Raises:
            GitHubRateLimited: paused or rate limited for longer than the client waits.
            GitHubUnavailable: no answer after every retry, or a 5xx asking for a long wait.
            GitHubOutcomeUnknown: a create under `single_try` may have been performed.
        """
        for _ in range(MAX_REDIRECTS):
            status, resp_headers, content = await self._request_once(method, url, headers, body)
            target = redirect_target(self._api_root, url, status, resp_headers)
            if target is None:
                return status, resp_headers, content
            log.info("GitHub %s %s answered %d: repeating it at %s (the repository moved)",
                     method, urlsplit(url).path, status, urlsplit(target).path)
            url = target
        return await self._request_once(method, url, headers, body)  # gidgethub raises a 3xx

    async def _request_once(self, method: str, url: str, headers: Mapping[str, str],
                            body: bytes) -> tuple[int, Mapping[str, str], bytes]:
        """Send one request (one URL, no redirect followed) under the limits, with retries."""
        as_app = headers.get("authorization", "").lower().startswith("bearer ")
        tries = _Tries(f"{method} {urlsplit(url).path}",
                       "app" if as_app else self.bucket)
        mutating = method in MUTATING_METHODS and not as_app
        tries.single = mutating and _SINGLE_TRY.get()
        async with self.limiter.serial(tries.bucket, mutating):
            while True:
                blocked_s = await self.limiter.acquire(tries.bucket, mutating)
                if blocked_s is not None:
                    raise _blocked(tries, blocked_s)
                if mutating:  # a try that lost its job's lease writes nothing more
                    await guard_write(tries.what)
                resp, error, unsent = await self._send(method, url, headers, body)
                if resp is not None and resp.status_code == 401 and not tries.renewed:
                    renewed = await self._renewed(tries, headers, resp)
                    if renewed is not None:
                        tries.renewed, headers = True, renewed
                        continue
                if tries.single and not unsent and (resp is None or resp.status_code >= 500):
                    raise self._outcome_unknown(tries, resp, error)
                wait_s = await self._wait_before_retry(tries, resp, error)
                if wait_s is None and resp is not None:
                    return resp.status_code, resp.headers, resp.content
                if wait_s:
                    await self.sleep(wait_s)

    async def _renewed(self, tries: _Tries, headers: Mapping[str, str],
                       resp: httpx.Response) -> dict[str, str] | None:
        """Return ``headers`` with a new credential in place of the one GitHub refused (401),
        or None to hand the refusal to gidgethub (module docstring, step 4)."""
        if self.renewal is None:
            return None
        scheme, _, credential = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":  # an App JWT: only a refusal for its time is renewed
            message = _message(resp.content)
            jwt = self.renewal.resign_jwt(resp.headers.get("date")) \
                if is_clock_refusal(message) else None
            if jwt is None:
                return None
            log.info("GitHub refused the App JWT of %s (%s): signed again at GitHub's time",
                     tries.what, message)
            return {**headers, "authorization": f"bearer {jwt}"}
        token = await self.renewal.replace_token(credential.strip())
        if token is None:
            return None
        log.warning("GitHub refused the installation token of %s (HTTP 401 %s): minted a new "
                    "one, sending it again", tries.what, _message(resp.content))
        return {**headers, "authorization": f"token {token}"}

    @staticmethod
    def _outcome_unknown(tries: _Tries, resp: httpx.Response | None,
                         error: str) -> GitHubOutcomeUnknown:
        """The error of a `single_try` create that may have been performed; a 5xx's
        ``retry-after`` becomes its ``retry_at`` (the caller pauses the bucket once it has
        looked for what the create made)."""
        hinted_s = retry_after_s(resp.headers) if resp is not None else None
        return GitHubOutcomeUnknown(f"{tries.what}: {error}; it may have been performed",
                                    None if resp is None else resp.status_code,
                                    None if hinted_s is None else in_seconds(hinted_s))

    async def _send(self, method: str, url: str, headers: Mapping[str, str],
                    body: bytes) -> tuple[httpx.Response | None, str, bool]:
        """Send once; return the answer (None: none), its short description, and whether the
        request certainly never left (`UNSENT_ERRORS`)."""
        try:
            resp = await self._session.request(method, url, headers=dict(headers), content=body)
        except httpx.TransportError as exc:
            record_github_response(method, None, {}, self._installation)
            return None, type(exc).__name__, isinstance(exc, UNSENT_ERRORS)
        record_github_response(method, resp.status_code, resp.headers, self._installation)
        return resp, f"HTTP {resp.status_code}", False

    async def _wait_before_retry(self, tries: _Tries, resp: httpx.Response | None,
                                 error: str) -> float | None:
        """Return None to hand ``resp`` to gidgethub, or the seconds to sleep before a retry.

        Raises:
            GitHubRateLimited: rate limited more than `MAX_RATE_LIMIT_RETRIES` times.
            GitHubUnavailable: a connection error after the last retry.
        """
        if resp is not None:
            limit_s = rate_limit_wait_s(resp.status_code, resp.headers, resp.content,
                                        tries.limit_hits)
            if limit_s is not None:
                return await self._rate_limited(tries, resp.status_code, limit_s)
            if resp.status_code < 500:
                return None
        if tries.failures >= len(self._delays_s):
            if resp is None:
                raise GitHubUnavailable(f"{tries.what}: {error} after "
                                        f"{tries.failures} retries")
            return None  # gidgethub raises GitHubBroken, mapped to GitHubUnavailable
        ceiling_s = self._delays_s[tries.failures]
        tries.failures += 1
        hinted_s = retry_after_s(resp.headers) if resp is not None else None
        if resp is not None and hinted_s is not None:
            tries.status, tries.server_error = resp.status_code, True
            await self.limiter.pause(tries.bucket, hinted_s)
        delay_s = backoff_s(ceiling_s)
        log.warning("GitHub %s failed (%s), retry %d in %.1f s%s", tries.what, error,
                    tries.failures, delay_s,
                    "" if hinted_s is None else f" after its retry-after of {hinted_s:g} s")
        return delay_s

    async def _rate_limited(self, tries: _Tries, status: int, limit_s: float) -> float:
        tries.limit_hits += 1
        tries.status, tries.server_error = status, False
        in_force_s = await self.limiter.pause(tries.bucket, limit_s)
        if tries.limit_hits > MAX_RATE_LIMIT_RETRIES:
            raise GitHubRateLimited(f"{tries.what}: still rate limited after "
                                    f"{MAX_RATE_LIMIT_RETRIES} waits", in_seconds(in_force_s),
                                    status)
        log.warning("GitHub %s rate limited (HTTP %d): %s paused for %.1f s", tries.what,
                    status, tries.bucket, in_force_s)
        return 0.0  # the limiter sleeps the pause (or refuses it) before the next try

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` (gidgethub's hook; tests may override it)."""
        await asyncio.sleep(seconds)


def _message(content: bytes) -> str:
    """GitHub's ``message`` in an error answer's JSON body ("" when there is none)."""
    try:
        data = json.loads(content)
    except ValueError:
        return ""
    return str(data.get("message") or "") if isinstance(data, dict) else ""


def _blocked(tries: _Tries, blocked_s: float) -> GitHubError:
    """The error for a request not sent because its bucket is paused for ``blocked_s``."""
    if tries.server_error:
        return GitHubUnavailable(f"{tries.what}: GitHub answered {tries.status} and asks to "
                                 f"wait {blocked_s:.0f} s", tries.status, in_seconds(blocked_s))
    return GitHubRateLimited(f"{tries.what}: {tries.bucket} is paused", in_seconds(blocked_s),
                             tries.status)
