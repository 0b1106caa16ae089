"""The App manifest's user authorization fits the web process: its callback URL is the route the
sign-in serves, beside the webhook, and installing the App signs nobody in.

The routes are those of the real web app (`app.main.create_app` with sign-in configured), so a
route renamed in app/dashboard/auth.py without the manifest (worker/cli/setup_flow.py and
deploy/app-manifest.json) fails here.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from starlette.routing import Route

from app.dashboard.session import AuthSettings
from app.main import create_app
from app.settings import WebSettings
from worker.cli.setup_flow import app_manifest, sign_in_callback_url

MANIFEST = Path(__file__).resolve().parents[3] / "deploy" / "app-manifest.json"


def _get_paths() -> set[str]:
    """The paths the web app answers with GET when sign-in is configured."""
    app = create_app(WebSettings(webhook_secret="s" * 32),
                     auth=AuthSettings(client_id="Iv23test", client_secret="c" * 40,
                                       session_secret="x" * 40))
    return {r.path for r in app.routes if isinstance(r, Route) and "GET" in (r.methods or ())}


def test_the_manifest_s_callback_is_the_sign_in_route_beside_the_webhook() -> None:
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    [callback] = manifest["callback_urls"]
    webhook, back = urlsplit(manifest["hook_attributes"]["url"]), urlsplit(callback)
    assert (back.scheme, back.netloc) == (webhook.scheme, webhook.netloc)
    assert back.path in _get_paths()
    assert back.path == "/auth/callback"
    assert manifest["request_oauth_on_install"] is False  # sign-in only from /login
    assert manifest["setup_on_update"] is False and "setup_url" not in manifest


@pytest.mark.parametrize(("webhook", "callback"), [
    ("https://llmgate.example.com/webhook", "https://llmgate.example.com/auth/callback"),
    ("https://ci.example.com/llmgate/webhook/", "https://ci.example.com/llmgate/auth/callback"),
    ("http://10.0.0.5:8000/webhook?x=1", "http://10.0.0.5:8000/auth/callback"),
])
def test_the_callback_follows_the_webhook_s_host_and_prefix(webhook: str, callback: str) -> None:
    assert sign_in_callback_url(webhook) == callback
    manifest = app_manifest(name="llmgate", webhook_url=webhook, redirect_url="http://a/cb")
    assert manifest["callback_urls"] == [callback]
