"""``llmgate setup``: a one-page local web server that walks a browser through the manifest flow.

It listens on 127.0.0.1 only. ``GET /`` answers a form that POSTs the manifest to GitHub (it
submits itself); GitHub sends the browser back to ``GET /callback?code=...&state=...``, where the
state is checked (it is random per run, so another site cannot feed us a code), the code is
exchanged once, and the credentials are stored (``worker.cli.setup_flow``). The request log is off:
the code travels in the query string.
"""

from __future__ import annotations

import hmac
import html
import json
import secrets
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from worker.cli.setup_flow import (
    AppRegistration,
    SetupError,
    app_manifest,
    exchange_code,
    new_app_url,
    store_credentials,
)

if TYPE_CHECKING:
    from http.server import BaseHTTPRequestHandler

#: How often the local server checks whether it should stop, seconds.
POLL_S = 0.05


@dataclass(frozen=True)
class SetupOptions:
    """What ``llmgate setup`` was asked for.

    Attributes:
        webhook_url: the public URL of the web process's ``/webhook``.
        output: the credentials file to create (mode 0600; must not exist).
        name: the App name (unique on GitHub). org: register under this organization.
        github_url / api_url: GitHub's web and API roots (GitHub Enterprise: ``https://HOST``
            and ``https://HOST/api/v3``).
        port: local port, 0 for any free one. public: let other accounts install the App.
    """

    webhook_url: str
    output: Path
    name: str = "llmgate"
    org: str | None = None
    github_url: str = "https://github.com"
    api_url: str = "https://api.github.com"
    port: int = 0
    public: bool = False


class SetupFlow:
    """The local server and the state of one registration (use `start`, `wait`, `close`)."""

    def __init__(self, options: SetupOptions) -> None:
        """Check the options before anything is registered.

        Raises:
            SetupError: the output file exists already, or a bad organization name.
        """
        if options.output.exists():
            raise SetupError(f"{options.output} exists; move it away or pass another --output")
        self.options = options
        self.state = secrets.token_urlsafe(24)
        self.action = new_app_url(options.github_url, options.org)
        self.registration: AppRegistration | None = None
        self.error: str | None = None
        self.done = threading.Event()
        self._lock = threading.Lock()
        from http.server import ThreadingHTTPServer  # not for `llmgate --help`

        self._server = ThreadingHTTPServer(("127.0.0.1", options.port), _handler(self))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/"
        self.manifest = app_manifest(name=options.name, webhook_url=options.webhook_url,
                                     redirect_url=self.url + "callback", public=options.public)

    def start(self) -> str:
        """Serve in a background thread; return the page to open in a browser."""
        threading.Thread(target=self._server.serve_forever, args=(POLL_S,), daemon=True).start()
        return self.url

    def wait(self, timeout_s: float) -> AppRegistration:
        """Block until the callback came back (codes expire after an hour).

        Raises:
            SetupError: no callback within ``timeout_s`` seconds, or the exchange failed.
        """
        if not self.done.wait(timeout_s):
            raise SetupError(f"no answer from GitHub within {timeout_s:.0f} s; run setup again")
        if self.registration is None:
            raise SetupError(self.error or "the registration failed")
        return self.registration

    def close(self) -> None:
        """Stop the local server."""
        self._server.shutdown()
        self._server.server_close()

    def form_page(self) -> str:
        """Return the page whose form POSTs the manifest (and the state) to GitHub."""
        action = html.escape(f"{self.action}?state={self.state}")
        manifest = html.escape(json.dumps(self.manifest))
        return (f"<!doctype html><title>llmgate setup</title>"
                f"<form id='f' method='post' action='{action}'>"
                f"<input type='hidden' name='manifest' value='{manifest}'>"
                f"<p>Register the GitHub App <b>{html.escape(self.manifest['name'])}</b> "
                f"for webhooks at {html.escape(self.options.webhook_url)}.</p>"
                f"<button type='submit'>Continue on GitHub</button></form>"
                f"<script>document.getElementById('f').submit()</script>")

    def callback(self, query: dict[str, list[str]]) -> tuple[int, str]:
        """Handle GitHub's redirect; return (HTTP status, page text)."""
        state, code = query.get("state", [""])[0], query.get("code", [""])[0]
        if not hmac.compare_digest(state.encode(), self.state.encode()):
            return 400, "This answer is not for this setup run (state mismatch); nothing was done."
        with self._lock:
            if self.done.is_set():
                return 409, "This setup run has finished already."
            try:
                import httpx  # not imported for `llmgate --help`

                with httpx.Client() as http:
                    reg = exchange_code(http, self.options.api_url, code)
                store_credentials(self.options.output, reg)
            except SetupError as exc:
                self.error = str(exc)
                self.done.set()
                return 502, f"Setup failed: {exc}"
            self.registration = reg
            self.done.set()
        return 200, (f"Registered {reg.slug} (App id {reg.app_id}). Credentials are in "
                     f"{self.options.output}. Now install the App: "
                     f"{reg.html_url}/installations/new")


def _handler(flow: SetupFlow) -> type[BaseHTTPRequestHandler]:
    """Return the request handler class of ``flow``'s local server (``/`` and ``/callback``)."""
    from http.server import BaseHTTPRequestHandler

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            parts = urlsplit(self.path)
            if parts.path == "/":
                self._answer(200, flow.form_page(), html_page=True)
            elif parts.path == "/callback":
                status, text = flow.callback(parse_qs(parts.query))
                self._answer(status, text)
            else:
                self._answer(404, "not found")

        def _answer(self, status: int, text: str, html_page: bool = False) -> None:
            body = (text if html_page else f"<!doctype html><p>{html.escape(text)}</p>").encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Log nothing: the callback's query string holds the one-time code."""

    return Handler


def run_setup(options: SetupOptions, *, open_browser: bool = True,
              timeout_s: float = 3600.0) -> int:
    """Run the whole registration from a terminal; return the exit status (0 done, 1 failed).

    Prints the page to open, then the App's id, slug and where its credentials are (never the
    secrets themselves).
    """
    try:
        flow = SetupFlow(options)
    except (SetupError, OSError) as exc:
        print(f"llmgate setup: {exc}", file=sys.stderr)
        return 1
    try:
        url = flow.start()
        print(f"Open {url} in a browser on this machine to register the GitHub App "
              f"(waiting up to {timeout_s / 60:.0f} minutes).", flush=True)
        if open_browser:
            import webbrowser

            webbrowser.open(url)
        reg = flow.wait(timeout_s)
    except SetupError as exc:
        print(f"llmgate setup: {exc}", file=sys.stderr)
        return 1
    finally:
        flow.close()
    print(f"Registered GitHub App {reg.slug} (id {reg.app_id}).\n"
          f"GITHUB_APP_ID, GITHUB_WEBHOOK_SECRET and GITHUB_APP_PRIVATE_KEY are in "
          f"{options.output} (mode 0600).\n"
          f"Install the App on your repositories: {reg.html_url}/installations/new")
    return 0


def add_setup_command(sub: Any) -> None:
    """Add ``llmgate setup`` to the CLI's subparsers (``argparse`` ``_SubParsersAction``)."""
    setup = sub.add_parser("setup", help="register the GitHub App from its manifest "
                           "(opens a local page)", description=run_setup.__doc__)
    setup.add_argument("--webhook-url", required=True,
                       help="public URL of the web process's /webhook, e.g. "
                            "https://llmgate.example.com/webhook")
    setup.add_argument("--org", help="register the App under this organization "
                       "(default: your personal account)")
    setup.add_argument("--name", default="llmgate", help="App name, unique on GitHub")
    setup.add_argument("--output", type=Path, default=Path("llmgate-app.env"),
                       help="credentials file to create, mode 0600 (default: llmgate-app.env)")
    setup.add_argument("--github-url", default="https://github.com",
                       help="GitHub's web root (GitHub Enterprise: https://HOST)")
    setup.add_argument("--api-url", default=None,
                       help="GitHub's API root (default: api.github.com, or HOST/api/v3 "
                            "when --github-url is not github.com)")
    setup.add_argument("--port", type=int, default=0, help="local port (default: any free one)")
    setup.add_argument("--public", action="store_true", help="let any account install the App")
    setup.add_argument("--no-browser", action="store_true", help="only print the page to open")
    setup.add_argument("--print-manifest", action="store_true",
                       help="print the manifest JSON and exit (registers nothing)")
    setup.set_defaults(func=cmd_setup)


def cmd_setup(args: Any) -> int:
    """Register the GitHub App through GitHub's manifest flow and store its credentials."""
    github_url = args.github_url.rstrip("/")
    api_url = args.api_url or ("https://api.github.com" if github_url == "https://github.com"
                               else f"{github_url}/api/v3")
    if args.print_manifest:
        try:
            manifest = app_manifest(name=args.name, webhook_url=args.webhook_url,
                                    redirect_url="http://127.0.0.1/callback", public=args.public)
        except SetupError as exc:
            print(f"llmgate setup: {exc}", file=sys.stderr)
            return 1
        print(json.dumps(manifest, indent=2))
        return 0
    options = SetupOptions(webhook_url=args.webhook_url, output=args.output, name=args.name,
                           org=args.org, github_url=github_url, api_url=api_url,
                           port=args.port, public=args.public)
    return run_setup(options, open_browser=not args.no_browser)
