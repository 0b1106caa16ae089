"""The fake GitHub's misbehaviour: configured faults, and GitHub's secondary rate limits.

Faults (``/_fake/setup`` ``faults``, consumed in order, the first that applies answers):
``{method?, operation?, path?, path_glob?, body_match?, status, times?, rate?, seed?, after?,
headers?, body?, rate_limit_reset_in_s?, revoke_token?}``.

- ``method``, ``operation``, ``path`` (the API path without the query) must equal the
  request's when given; ``path_glob`` is an ``fnmatch`` pattern over that path, e.g.
  ``/repos/*/check-runs`` or ``/repos/*/issues/*/comments``.
- ``body_match``: top-level keys whose values the request's JSON body must equal, e.g.
  ``{"status": "completed"}`` for the PATCH that completes a check run.
- ``revoke_token``: true to refuse the installation token the request carries, from now on:
  the request is answered 401 "Bad credentials" (``status`` and ``body`` may say otherwise)
  and every later request with that token too, as GitHub answers a revoked token.
- ``times``: how many requests it answers (default 1; ``null``: every one).
- ``rate``: the fraction 0-1 of matching requests it answers, decided by a hash of ``seed``
  (default 0) and how many matching requests it has seen, so a run repeats exactly.
- ``after``: true to perform the request first and then answer ``status`` anyway, as a
  gateway that times out while GitHub completes the work (a 502/504 after a POST created its
  check run or comment). Without it the request is not performed.

Secondary rate limits (``/_fake/setup`` ``secondary_limits``: ``{}`` for GitHub's documented
figures, or any of ``per_minute``, ``per_hour``, ``points_per_minute``, ``methods``; ``null``
turns them off, the default). Source: GitHub Docs, "Rate limits for the REST API", section
"About secondary rate limits" (docs.github.com/rest/using-the-rest-api/
rate-limits-for-the-rest-api#about-secondary-rate-limits, text kept in github/docs
``data/reusables/rest-api/secondary-rate-limit-rest-graphql.md``, read 2025): "no more than 80
content-generating requests per minute and no more than 500 content-generating requests per
hour", and "no more than 900 points per minute" for one REST endpoint, where most ``GET`` cost
1 point and most ``POST``, ``PATCH``, ``PUT`` or ``DELETE`` cost 5. GitHub does not define
"content-generating"; the fake counts every mutating request made with an installation token
(App-JWT requests such as minting a token are not counted), the reading the worker's pacer
(worker/github/ratelimit.py) also takes. Limits are per installation, over sliding windows of
the requests the fake performed. A request over a limit is not performed: it is answered 403
with GitHub's secondary-limit message and a ``retry-after`` of the seconds until the window
has room, and recorded in ``violations`` as kind ``secondary_rate_limit``.
"""

from __future__ import annotations

import fnmatch
import math
import random
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

#: GitHub's documented secondary limits (see the module docstring for the source).
CONTENT_PER_MINUTE = 80
CONTENT_PER_HOUR = 500
ENDPOINT_POINTS_PER_MINUTE = 900
WRITE_POINTS, READ_POINTS = 5, 1
MUTATING = frozenset({"POST", "PATCH", "PUT", "DELETE"})
SECONDARY_MESSAGE = ("You have exceeded a secondary rate limit. Please wait a few minutes "
                     "before you try again. If you reach out to GitHub Support for help, "
                     "please include the request ID.")
SECONDARY_DOCS = ("https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"
                  "#about-secondary-rate-limits")

Answer = tuple[int, Any, dict[str, str]]


@dataclass(frozen=True)
class Taken:
    """A fault that answers one request: ``answer``, after performing it when ``after``;
    ``revoke``: the request's installation token is refused from now on."""

    answer: Answer
    after: bool
    revoke: bool = False


def _matches(fault: dict[str, Any], method: str, api_path: str, op: str, body: Any) -> bool:
    if fault.get("method", method).upper() != method or fault.get("operation", op) != op:
        return False
    wanted = fault.get("body_match") or {}
    if wanted and not (isinstance(body, dict) and all(
            k in body and body[k] == v for k, v in wanted.items())):
        return False
    if fault.get("path", api_path) != api_path:
        return False
    glob = fault.get("path_glob")
    return glob is None or fnmatch.fnmatchcase(api_path, glob)


def _fires(fault: dict[str, Any]) -> bool:
    """Whether a matching fault answers this request (``times`` left, ``rate`` drawn)."""
    times = fault.get("times", 1)
    if times is not None and times <= 0:
        return False
    rate = fault.get("rate")
    if rate is not None:
        seen = fault.get("seen", 0)
        fault["seen"] = seen + 1
        if random.Random(f"{fault.get('seed', 0)}:{seen}").random() >= float(rate):
            return False
    if times is not None:
        fault["times"] = times - 1
    fault["fired"] = fault.get("fired", 0) + 1
    return True


def _answer(fault: dict[str, Any], now: float) -> Answer:
    if "rate_limit_reset_in_s" in fault:
        reset = int(now + fault["rate_limit_reset_in_s"])
        return 403, {"message": "API rate limit exceeded for installation.",
                     "documentation_url": "https://docs.github.com/rest"}, {
            "x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}
    if fault.get("revoke_token") and "status" not in fault:
        return 401, fault.get("body") or {"message": "Bad credentials",
                                          "documentation_url": "https://docs.github.com/rest",
                                          "status": "401"}, {}
    status = int(fault["status"])
    body = fault.get("body") or {"message": HTTPStatus(status).phrase}
    return status, body, {k.lower(): str(v) for k, v in fault.get("headers", {}).items()}


def take_fault(faults: list[dict[str, Any]], method: str, api_path: str, op: str,
               now: float, body: Any = None) -> Taken | None:
    """Return the first configured fault that answers this request (consuming it), or None.

    ``faults`` are the ``/_fake/setup`` dicts (see the module docstring); their ``times``,
    ``seen`` and ``fired`` counters are updated in place. ``body``: the request's JSON body.
    """
    for fault in faults:
        if _matches(fault, method, api_path, op, body) and _fires(fault):
            return Taken(_answer(fault, now), bool(fault.get("after")),
                         bool(fault.get("revoke_token")))
    return None


@dataclass
class SecondaryLimits:
    """Sliding-window counters of the requests performed, per installation (see the module
    docstring). ``config`` None: nothing is enforced (the default)."""

    config: dict[str, Any] | None = None
    _content: dict[str, deque[float]] = field(default_factory=dict)
    _points: dict[tuple[str, str], deque[tuple[float, int]]] = field(default_factory=dict)

    def configure(self, value: dict[str, Any] | None) -> None:
        """Set the limits (``{}``: GitHub's figures; None: off)."""
        self.config = None if value is None else dict(value)

    def reset(self) -> None:
        """Forget every counted request (the configuration stays)."""
        self._content.clear()
        self._points.clear()

    def _figures(self) -> tuple[int, int, int, frozenset[str]]:
        cfg = self.config or {}
        methods = frozenset(m.upper() for m in cfg.get("methods", MUTATING))
        return (int(cfg.get("per_minute", CONTENT_PER_MINUTE)),
                int(cfg.get("per_hour", CONTENT_PER_HOUR)),
                int(cfg.get("points_per_minute", ENDPOINT_POINTS_PER_MINUTE)), methods)

    def check(self, bucket: str | None, method: str, op: str,
              now: float) -> tuple[str, float] | None:
        """Count the request if it fits; else return ``(which limit, seconds until room)``.

        ``bucket`` is the installation id as text, None for an App-JWT request (not limited).
        """
        if self.config is None or bucket is None:
            return None
        per_minute, per_hour, points_limit, methods = self._figures()
        content = self._content.setdefault(bucket, deque())
        while content and content[0] <= now - 3600:
            content.popleft()
        points = self._points.setdefault((bucket, op), deque())
        while points and points[0][0] <= now - 60:
            points.popleft()
        creating = method in methods
        cost = WRITE_POINTS if method in MUTATING else READ_POINTS
        if creating:
            last_minute = [t for t in content if t > now - 60]
            if len(last_minute) >= per_minute:
                return f"{per_minute} content-generating requests per minute", \
                    last_minute[-per_minute] + 60 - now
            if len(content) >= per_hour:
                return f"{per_hour} content-generating requests per hour", \
                    content[-per_hour] + 3600 - now
        if sum(p for _, p in points) + cost > points_limit:
            return f"{points_limit} points per minute on {op}", points[0][0] + 60 - now
        if creating:
            content.append(now)
        points.append((now, cost))
        return None


def secondary_answer(wait_s: float) -> Answer:
    """GitHub's answer to a request over a secondary limit: 403, its message, ``retry-after``."""
    return 403, {"message": SECONDARY_MESSAGE, "documentation_url": SECONDARY_DOCS}, {
        "retry-after": str(max(1, math.ceil(wait_s)))}
