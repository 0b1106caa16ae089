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


class Access(Protocol):
    """Decides, per request, which repositories (``owner/name``) its user may read."""

    async def readable(self, request: Request, repo: str) -> bool:
        """Return whether the request's user may read ``repo`` (``owner/name``)."""
        ...

    async def readable_repos(self, request: Request, repos: Sequence[str]) -> list[str]:
        """Return those of ``repos`` the request's user may read, in the order given."""
        ...
