"""Who may read which repository's history: the seam between the dashboard and sign-in.

Every dashboard view and data answer asks an `Access` before it reads anything of a repository;
a repository it refuses answers exactly like one that does not exist (404, same body), never
403. The real implementation (GitHub sign-in, the App's user authorization) lives in
``app/dashboard/auth.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from starlette.requests import Request


class User(Protocol):
    """A signed-in user, as the pages show it: GitHub's ``login``."""

    @property
    def login(self) -> str:
        """Return the user's GitHub login (shown escaped)."""
        ...


class Access(Protocol):
    """Decides, per request, who its user is and which repositories (``owner/name``) they
    may read."""

    def user(self, request: Request) -> User | None:
        """Return the request's signed-in user, or None when signed out (no, bad, expired or
        ended session)."""
        ...

    async def readable(self, request: Request, repo: str) -> bool:
        """Return whether the request's user may read ``repo`` (``owner/name``)."""
        ...

    async def readable_repos(self, request: Request, repos: Sequence[str]) -> list[str]:
        """Return those of ``repos`` the request's user may read, in the order given."""
        ...
