"""Which of GitHub's redirects the client follows, and where to (pure).

A repository that was renamed or transferred keeps answering at its old API path: GitHub
answers 301 (permanent) or 302/307 (temporary) with a ``Location`` on the new path, typically
``/repositories/{id}/...``, and says the request "should be repeated verbatim" there (GitHub
docs, "Best practices for using the REST API": follow redirects; "Getting started with the REST
API": HTTP redirects). gidgethub does not follow redirects (it raises ``RedirectionException``
for any 3xx), and httpx's own following turns a redirected POST/PATCH into a GET for 301/302,
so `worker.github.transport` repeats the request itself, with the same method, headers and
body. 308 (permanent, method kept) is followed alike.

Only a ``Location`` on the API root's own origin (scheme, host, port) and under its path (an
Enterprise root's ``/api/v3``) is followed, so an installation token is never sent to another
host; at most `MAX_REDIRECTS` hops.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urljoin, urlsplit

#: Statuses whose ``Location`` is followed with the request repeated verbatim.
FOLLOWED_STATUSES = frozenset({301, 302, 307, 308})
#: Hops one request follows before the redirect itself is handed back (then an error).
MAX_REDIRECTS = 3


def redirect_target(api_root: str, url: str, status: int,
                    headers: Mapping[str, str]) -> str | None:
    """Return the absolute URL to repeat a request at, or None to not follow the answer.

    Args:
        api_root: the client's API root, e.g. ``https://api.github.com`` or
            ``https://HOST/api/v3``.
        url: the URL the answer came from (a relative ``Location`` is resolved against it).
        status: the answer's HTTP status.
        headers: the answer's headers (case-insensitive lookups, as httpx's).
    """
    location = headers.get("location")
    if status not in FOLLOWED_STATUSES or not location:
        return None
    target = urljoin(url, location)
    root, there = urlsplit(api_root), urlsplit(target)
    if (there.scheme, there.netloc) != (root.scheme, root.netloc):
        return None
    prefix = root.path.rstrip("/")
    if prefix and not (there.path == prefix or there.path.startswith(prefix + "/")):
        return None
    return target
