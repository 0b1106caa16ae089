"""The typed errors of the GitHub client (re-exported by ``worker.github.client``).

A job turns them into its next step: `GitHubRateLimited` and a `GitHubUnavailable` with
``retry_at`` are deferred by `GitHubError.retry_after_s` seconds; any other `GitHubError` is
permanent. None of them ever carries a token: messages hold the method, the API path and the
status only.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class GitHubError(Exception):
    """GitHub refused a request.

    Attributes:
        status_code: the HTTP status, None without an answer (a connection error, or a
            request not sent because the installation is paused).
        retry_at: when a retry may succeed (timezone-aware UTC), None when unknown.
    """

    def __init__(self, message: str, status_code: int | None = None,
                 retry_at: datetime | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_at = retry_at

    def retry_after_s(self, now: datetime | None = None) -> float | None:
        """Seconds from ``now`` (default: the current time) until ``retry_at``, >= 0, or None."""
        if self.retry_at is None:
            return None
        return max(0.0, (self.retry_at - (now or datetime.now(UTC))).total_seconds())


class GitHubUnavailable(GitHubError):
    """GitHub kept answering 5xx, or could not be reached, through every retry (transient).

    ``retry_at`` is set when GitHub's ``retry-after`` asked for a longer wait than the client
    sleeps (``LLMGATE_GITHUB_MAX_WAIT_S``).
    """


class GitHubOutcomeUnknown(GitHubUnavailable):
    """A create (POST) failed in a way that may hide its success: a 5xx answer, a timeout or a
    connection lost after the request was sent (a gateway answers 502/504 while GitHub goes on
    and performs it). The transport never repeats such a request blindly: the caller first
    looks for what it may have created and adopts it (`worker.github.client`).
    """


class GitHubRateLimited(GitHubError):
    """The installation is rate limited until ``reset_at`` (timezone-aware UTC).

    Raised before sending when the shared pause of the installation (set by any worker) is
    longer than the client sleeps, or when a request stays rate limited through its retries.
    Source: GitHub docs "Rate limits for the REST API": a primary limit answers 403/429 with
    ``x-ratelimit-remaining: 0`` and ``x-ratelimit-reset`` (Unix seconds); a secondary limit
    sends ``retry-after`` (seconds), or nothing (then wait at least a minute).
    """

    def __init__(self, message: str, reset_at: datetime, status_code: int | None = None) -> None:
        super().__init__(f"{message} (rate limited until {reset_at.isoformat()})", status_code,
                         reset_at)
        self.reset_at = reset_at

    def retry_after_s(self, now: datetime | None = None) -> float:
        """Seconds from ``now`` (default: the current time) until the limit resets, >= 0."""
        return max(0.0, (self.reset_at - (now or datetime.now(UTC))).total_seconds())


def in_seconds(seconds: float) -> datetime:
    """Return the time ``seconds`` from now, timezone-aware UTC."""
    return datetime.now(UTC) + timedelta(seconds=seconds)
