"""Register the GitHub App from a manifest: what llmgate asks for, and the code exchange.

GitHub's App manifest flow (docs.github.com/en/apps/sharing-github-apps/registering-a-github-app-
from-a-manifest) has three steps, all within one hour: (1) the browser POSTs a form field
``manifest`` (JSON) and a ``state`` to ``{web}/settings/apps/new`` or
``{web}/organizations/{org}/settings/apps/new``; (2) after the person confirms, GitHub redirects
to the manifest's ``redirect_url`` with ``?code=...&state=...``; (3) the code is exchanged with
``POST {api}/app-manifests/{code}/conversions`` (no authentication) for the App's id, private key
(``pem``), webhook secret, client id and client secret. ``worker.cli.setup`` drives the browser
part; this module holds the manifest and steps 3 and after: the credentials go to a file
created with mode 0600 that ``docker compose --env-file``, ``fly secrets import`` and ``kubectl
create secret --from-env-file`` all read, with the dashboard's sign-in settings
(app/dashboard/session.py `AuthSettings`: the client id and secret and a new session secret).
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

if TYPE_CHECKING:  # httpx and the JWT code load when the App is registered, not for --help
    import httpx

#: Repository permissions llmgate needs, and why (GitHub docs, "Choosing permissions for a
#: GitHub App" and each endpoint's "Fine-grained access tokens" section).
APP_PERMISSIONS: dict[str, str] = {
    "checks": "write",         # create and complete the llmgate check run; check_run events
    "pull_requests": "read",   # read a PR's head and base (rerun); pull_request events
    "issues": "write",         # sticky PR comment, reaction to /llmgate rerun; issue_comment events
    "contents": "read",        # git fetch of the PR's commits
    "metadata": "read",        # mandatory; collaborator permission of a rerun commenter
    "merge_queues": "read",    # merge_group events: gate the merge queue's commits
}
#: The web process's route GitHub sends a signed-in user back to ("Sign in with GitHub",
#: app/dashboard/auth.py), beside ``/webhook``.
SIGN_IN_CALLBACK_PATH = "/auth/callback"
#: Webhook events the App subscribes to: those ``app.routes`` handles (``ping`` is always sent).
APP_EVENTS: tuple[str, ...] = ("check_run", "check_suite", "issue_comment", "merge_group",
                                "pull_request", "push")
DEFAULT_GITHUB_URL = "https://github.com"
DEFAULT_API_URL = "https://api.github.com"
#: Bound on the code exchange, seconds.
EXCHANGE_TIMEOUT_S = 30.0
_ORG = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")
_CODE = re.compile(r"[A-Za-z0-9_-]{1,200}")
#: A webhook secret every env-file reader takes literally (compose would expand a ``$``,
#: kubectl keeps quotes): GitHub's are hex; anything else is replaced by one of ours.
_SAFE_SECRET = re.compile(r"[A-Za-z0-9_.+/=-]{16,256}")
#: A client id every env-file reader takes literally (GitHub's: ``Iv1.`` or ``Iv23`` and hex).
_SAFE_CLIENT_ID = re.compile(r"[A-Za-z0-9_.-]{1,100}")


class SetupError(Exception):
    """The registration could not go on; the message says what to do."""


def app_manifest(*, name: str, webhook_url: str, redirect_url: str,
                 homepage_url: str | None = None, public: bool = False) -> dict[str, Any]:
    """Return the App manifest: llmgate's permissions and events, pointing at ``webhook_url``.

    The dashboard's "Sign in with GitHub" (app/dashboard/auth.py) is the App's user
    authorization: its callback URL is the web process's `SIGN_IN_CALLBACK_PATH` beside the
    webhook (``https://HOST/webhook`` → ``https://HOST/auth/callback``); installing the App
    signs nobody in (``request_oauth_on_install: false``: llmgate signs users in from its own
    ``/login`` only, with a ``state`` and PKCE) and, having no setup URL, the App sends nobody
    anywhere after an installation changes (``setup_on_update: false``). Parameter names:
    GitHub docs, "Registering a GitHub App from a manifest".

    Raises:
        SetupError: ``webhook_url`` is not an absolute http(s) URL, or ``name`` is empty or
            longer than GitHub's 34 characters.
    """
    parts = urlsplit(webhook_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SetupError(f"the webhook URL must be an absolute https URL, got {webhook_url!r}")
    if not 0 < len(name.strip()) <= 34:
        raise SetupError("the App name must have 1 to 34 characters (GitHub's limit)")
    return {
        "name": name.strip(),
        "url": homepage_url or f"{parts.scheme}://{parts.netloc}",
        "description": "Runs a repository's LLM eval suites on pull requests and gates on "
                       "regressions (llmgate).",
        "hook_attributes": {"url": webhook_url, "active": True},
        "redirect_url": redirect_url,
        "callback_urls": [sign_in_callback_url(webhook_url)],
        "request_oauth_on_install": False,
        "setup_on_update": False,
        "public": public,
        "default_permissions": dict(APP_PERMISSIONS),
        "default_events": list(APP_EVENTS),
    }


def sign_in_callback_url(webhook_url: str) -> str:
    """Return the sign-in callback URL of the web process that serves ``webhook_url``: its
    last path segment (``webhook``) replaced by `SIGN_IN_CALLBACK_PATH`, query dropped."""
    parts = urlsplit(webhook_url)
    root = parts.path.rstrip("/").rpartition("/")[0]
    return f"{parts.scheme}://{parts.netloc}{root}{SIGN_IN_CALLBACK_PATH}"


def new_app_url(github_url: str, org: str | None = None) -> str:
    """Return where the manifest form is POSTed: the account's or the organization's page.

    Raises:
        SetupError: ``org`` is not a valid GitHub organization name.
    """
    root = github_url.rstrip("/")
    if org is None:
        return f"{root}/settings/apps/new"
    if not _ORG.fullmatch(org):
        raise SetupError(f"{org!r} is not a GitHub organization name")
    return f"{root}/organizations/{org}/settings/apps/new"


@dataclass(frozen=True, repr=False)
class AppRegistration:
    """What GitHub returns for a registered App (secrets are never shown by ``repr``).

    Attributes:
        app_id: the App's numeric id (``GITHUB_APP_ID``).
        slug: the App's URL name; html_url: its settings page.
        pem: the App's private key, PEM text (``GITHUB_APP_PRIVATE_KEY``).
        webhook_secret: the webhook secret (``GITHUB_WEBHOOK_SECRET``).
        client_id, client_secret: the App's OAuth client, for the dashboard's "Sign in with
            GitHub" (``LLMGATE_GITHUB_CLIENT_ID``, ``LLMGATE_GITHUB_CLIENT_SECRET``); "" when
            GitHub's answer holds none an env file can hold literally (`_SAFE_CLIENT_ID`,
            `_SAFE_SECRET`).
    """

    app_id: int
    slug: str
    html_url: str
    pem: str = field(repr=False)
    webhook_secret: str = field(repr=False)
    client_id: str = ""
    client_secret: str = field(default="", repr=False)

    def __repr__(self) -> str:
        """Show the App's id and slug only."""
        return f"AppRegistration(app_id={self.app_id}, slug={self.slug!r})"


def exchange_code(http: httpx.Client, api_url: str, code: str) -> AppRegistration:
    """Trade the redirect's ``code`` for the App's credentials (``POST /app-manifests/{code}/
    conversions``, answer 201).

    When GitHub returns no webhook secret, or one an env file cannot hold literally (see
    ``_SAFE_SECRET``), one is made (32 random bytes, hex) and set with ``PATCH /app/hook/config``
    as the App.

    Raises:
        SetupError: a malformed code, an answer other than 201 (e.g. 404 for an expired code:
            codes live one hour), a network error, or an answer without id/pem.
    """
    if not _CODE.fullmatch(code):
        raise SetupError("GitHub's redirect carried a malformed code")
    url = f"{api_url.rstrip('/')}/app-manifests/{quote(code, safe='')}/conversions"
    data = _request(http, "POST", url, 201, "exchanging the code")
    try:
        app_id, slug, pem = int(data["id"]), str(data["slug"]), str(data["pem"])
    except (KeyError, TypeError, ValueError):
        raise SetupError("GitHub's answer lacks the App id, slug or private key") from None
    secret = data.get("webhook_secret")
    if not (isinstance(secret, str) and _SAFE_SECRET.fullmatch(secret)):
        secret = secrets.token_hex(32)
        from worker.github import AppCredentials, GitHubAuthError, app_jwt

        try:
            jwt = app_jwt(AppCredentials(str(app_id), pem))
        except GitHubAuthError:
            raise SetupError("GitHub's answer holds no usable private key") from None
        _request(http, "PATCH", f"{api_url.rstrip('/')}/app/hook/config", 200,
                 "setting the webhook secret", headers={"Authorization": f"Bearer {jwt}"},
                 json={"secret": secret, "content_type": "json"})
    client_id, client_secret = data.get("client_id"), data.get("client_secret")
    if not (isinstance(client_id, str) and _SAFE_CLIENT_ID.fullmatch(client_id)
            and isinstance(client_secret, str) and _SAFE_SECRET.fullmatch(client_secret)):
        client_id = client_secret = ""  # sign-in left off: a client secret is made by hand
    return AppRegistration(app_id, slug, str(data.get("html_url") or ""), pem, str(secret),
                           client_id, client_secret)


def _request(http: httpx.Client, method: str, url: str, expected: int, what: str,
             **kwargs: Any) -> dict[str, Any]:
    import httpx

    headers = {"Accept": "application/vnd.github+json", "User-Agent": "llmgate-setup",
               **kwargs.pop("headers", {})}
    try:
        resp = http.request(method, url, headers=headers, timeout=EXCHANGE_TIMEOUT_S, **kwargs)
    except httpx.HTTPError as exc:
        raise SetupError(f"{what}: cannot reach {urlsplit(url).netloc} ({exc})") from None
    if resp.status_code != expected:
        hint = " (codes expire after one hour: start again)" if resp.status_code == 404 else ""
        raise SetupError(f"{what}: GitHub answered {resp.status_code}{hint}")
    try:
        body = resp.json()
    except ValueError:
        raise SetupError(f"{what}: GitHub's answer is not JSON") from None
    if not isinstance(body, dict):
        raise SetupError(f"{what}: GitHub's answer is not a JSON object")
    return body


def env_file_text(reg: AppRegistration, session_secret: str | None = None) -> str:
    """Return the credentials as ``NAME=value`` lines; the PEM on one line with ``\\n`` escapes
    (the worker turns them back into newlines).

    With the App's client id and secret, the lines the web process's "Sign in with GitHub"
    reads (app/dashboard/session.py `AuthSettings.from_env`, which wants all three or none)
    follow: ``LLMGATE_GITHUB_CLIENT_ID``, ``LLMGATE_GITHUB_CLIENT_SECRET`` and
    ``LLMGATE_SESSION_SECRET`` (``session_secret``, or None: 32 new random bytes, hex).
    Without them, a comment says how to turn sign-in on.
    """
    pem_one_line = reg.pem.strip().replace("\r\n", "\n").replace("\n", "\\n")
    text = (f"# GitHub App {reg.slug} ({reg.html_url}), written by llmgate setup\n"
            f"GITHUB_APP_ID={reg.app_id}\n"
            f"GITHUB_WEBHOOK_SECRET={reg.webhook_secret}\n"
            f"GITHUB_APP_PRIVATE_KEY={pem_one_line}\n")
    if not (reg.client_id and reg.client_secret):
        return text + ("# Sign in with GitHub: GitHub returned no usable client secret; generate "
                       "one in the App's settings (docs/install.md)\n")
    return text + ("# Sign in with GitHub (the dashboard), for the web process\n"
                   f"LLMGATE_GITHUB_CLIENT_ID={reg.client_id}\n"
                   f"LLMGATE_GITHUB_CLIENT_SECRET={reg.client_secret}\n"
                   f"LLMGATE_SESSION_SECRET={session_secret or secrets.token_hex(32)}\n")


def store_credentials(path: Path, reg: AppRegistration) -> None:
    """Write `env_file_text` to a new file readable by its owner only (mode 0600).

    Raises:
        SetupError: the file exists (never overwritten: it may hold another App's key) or
            cannot be created.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise SetupError(f"{path} exists; move it away or pass another --output") from None
    except OSError as exc:
        raise SetupError(f"cannot create {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        os.fchmod(out.fileno(), 0o600)  # whatever the umask
        out.write(env_file_text(reg))
