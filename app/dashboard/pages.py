"""What every dashboard answer shares: its headers, templates, content negotiation, parameters.

Templates (app/dashboard/templates/, jinja2 with autoescape on) see records and `model` values
only; every text in them is escaped, the charts' SVG is built escaped by `charts`.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from starlette.requests import Request

from app.dashboard import charts, model

if TYPE_CHECKING:
    import jinja2

#: Headers of every dashboard answer: no script, no frame, nothing from another origin (inline
#: styles and inline SVG only); never indexed; private to the signed-in user, revalidated, and
#: varying with what the request accepts and who sent it.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                               "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; "
                               "form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Robots-Tag": "noindex, nofollow",
    "Cache-Control": "private, no-cache",
    "Vary": "Accept, Cookie",
}


@functools.cache
def environment() -> jinja2.Environment:
    """The templates' environment (also `llmgate history`'s, worker/cli/history_site.py),
    made on the first page rendered: a web process that serves no dashboard page never
    imports jinja2 (tests/unit/report/test_report_page.py keeps the webhook path light)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters.update(number=charts.number, short=model.short, when=model.when,
                       segment=model.segment)
    env.globals.update(status_words=model.STATUS_WORDS, sparkline=charts.sparkline)
    return env


class Missing(Exception):  # noqa: N818 - a signal, answered as the one 404
    """What was asked for is not shown to this request: unknown, refused or malformed."""


def render(template: str, request: Request, signed_in: str | None, **context: Any) -> str:
    """Return ``template`` rendered with ``context``, ``root`` (the app's root path),
    ``here`` (`current_path`) and ``signed_in`` (the signed-in user's login, None when signed
    out): the nav offers "Sign in with GitHub" (back to ``here``) or "<login> · Sign out"."""
    root = str(request.scope.get("root_path", ""))
    page = environment().get_template(template)
    return page.render(root=root, here=current_path(request), signed_in=signed_in, **context)


def current_path(request: Request) -> str:
    """Return the request's path as the browser sent it (percent-encoded, so an example's
    segments keep their ``%2F``), under the app's root path; no query."""
    root = str(request.scope.get("root_path", ""))
    raw = request.scope.get("raw_path")
    path = raw.decode("latin-1").partition("?")[0] if isinstance(raw, bytes) else \
        request.url.path
    return path if path.startswith(root + "/") else root + path


def wants_json(accept: str) -> bool:
    """Return whether an ``Accept`` header prefers ``application/json`` to HTML: JSON is
    listed with a quality above that of ``text/html`` (and of ``*/*`` when HTML is not
    listed). Ties go to HTML, as browsers send ``text/html`` first."""
    quality: dict[str, float] = {}
    for part in accept.split(","):
        kind, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        quality[kind.lower()] = max(q, quality.get(kind.lower(), 0.0))
    json_q = quality.get("application/json", 0.0)
    html_q = quality.get("text/html", quality.get("text/*", quality.get("*/*", 0.0)))
    return json_q > 0 and json_q > html_q


def query_int(request: Request, name: str, default: int, most: int) -> int:
    """Return the query parameter ``name`` as an integer in 1..``most``; ``default`` when it
    is absent or not a number."""
    try:
        value = int(request.query_params.get(name, default))
    except ValueError:
        return default
    return min(max(value, 1), most)


def example_target(request: Request) -> tuple[str, str]:
    """Return (suite, example id) of ``.../examples/<suite>/<example id>``: each segment
    percent-decoded on its own (`model.segment`), so either may hold ``/``.

    Raises:
        Missing: the path has no two segments after ``examples/``.
    """
    raw = request.scope.get("raw_path")
    path = raw.decode("latin-1").partition("?")[0] if isinstance(raw, bytes) else \
        request.url.path
    parts = path.split("/")  # the two segments are encoded: a "/" in one is %2F
    if len(parts) < 4 or parts[-3] != "examples" or not parts[-2] or not parts[-1]:
        raise Missing(path)
    return unquote(parts[-2], errors="replace"), unquote(parts[-1], errors="replace")
