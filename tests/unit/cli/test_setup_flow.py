"""``llmgate setup``: the manifest flow against a small local stand-in for GitHub's two sides.

The stand-in (this file's own; real HTTP on 127.0.0.1) plays github.com's "new App" form
endpoint, which answers a POSTed manifest with a redirect to ``redirect_url?code&state``, and
the API's ``POST /app-manifests/{code}/conversions`` (under an Enterprise-style ``/api/v3``
prefix) and ``PATCH /app/hook/config``. A test plays the browser with httpx.
"""

from __future__ import annotations

import html
import json
import re
import stat
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
import pytest

from app.dashboard.session import AuthSettings
from app.settings import WebSettings
from tests.conftest import free_port
from worker.cli.demo import _keypair
from worker.cli.main import main as cli_main
from worker.cli.setup import SetupFlow, SetupOptions
from worker.cli.setup_flow import APP_EVENTS, APP_PERMISSIONS, SetupError
from worker.runtime.settings import WorkerConfig

GITHUB_SECRET = "e340154128314309424b7c8e90325147d99fdafa"  # GitHub's docs example: hex
#: The App's OAuth client as GitHub's conversion answers it (its docs' example shapes).
CLIENT_ID, CLIENT_SECRET = "Iv23liAbCdEf0123", "1d4b2097ac622ba702d19de498f005747a8b21d3"
KEYPAIR = _keypair()  # one RSA key for the module: making one takes a while


class FakeGitHub:
    """Records what it was sent; ``webhook_secret``, ``client_id`` and ``client_secret`` are
    what the conversion answers (None: the field is left out)."""

    def __init__(self) -> None:
        self.private_pem, self.public_pem = KEYPAIR
        self.webhook_secret: str | None = GITHUB_SECRET
        self.client_id: str | None = CLIENT_ID
        self.client_secret: str | None = CLIENT_SECRET
        self.forms: list[dict[str, Any]] = []
        self.codes: dict[str, bool] = {}  # code -> exchanged
        self.conversions: list[str] = []
        self.hook_configs: list[dict[str, Any]] = []
        self.jwt_claims: list[dict[str, Any]] = []
        self.expire_codes = False
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None):
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length", "0")))

            def do_POST(self) -> None:  # noqa: N802
                parts = urlsplit(self.path)
                if parts.path.endswith("/settings/apps/new"):
                    form = parse_qs(self._body().decode())
                    manifest = json.loads(form["manifest"][0])
                    state = parse_qs(parts.query)["state"][0]
                    fake.forms.append({"path": parts.path, "manifest": manifest, "state": state})
                    code = f"code{len(fake.codes)}"
                    fake.codes[code] = False
                    self._send(302, headers={
                        "Location": f"{manifest['redirect_url']}?code={code}&state={state}"})
                    return
                match = re.fullmatch(r"/api/v3/app-manifests/([^/]+)/conversions", parts.path)
                if match is None:
                    self._send(404, {"message": "Not Found"})
                    return
                code = match.group(1)
                fake.conversions.append(code)
                if fake.expire_codes or fake.codes.get(code) is not False:
                    self._send(404, {"message": "Not Found"})
                    return
                fake.codes[code] = True
                client = {k: v for k, v in (("client_id", fake.client_id),
                                            ("client_secret", fake.client_secret)) if v is not None}
                self._send(201, {"id": 4242, "slug": "llmgate-acme", "node_id": "MDM",
                                 "html_url": "https://github.com/apps/llmgate-acme", **client,
                                 "webhook_secret": fake.webhook_secret, "pem": fake.private_pem})

            def do_PATCH(self) -> None:  # noqa: N802
                if self.path != "/api/v3/app/hook/config":
                    self._send(404, {"message": "Not Found"})
                    return
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                try:
                    claims = jwt.decode(token, fake.public_pem, algorithms=["RS256"])
                except jwt.InvalidTokenError:
                    self._send(401, {"message": "A JSON web token could not be decoded"})
                    return
                fake.jwt_claims.append(claims)
                fake.hook_configs.append(json.loads(self._body()))
                self._send(200, {"content_type": "json", "insecure_ssl": "0", "url": "x"})

        return Handler


@pytest.fixture()
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    threading.Thread(target=fake.server.serve_forever, args=(0.05,), daemon=True).start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


@pytest.fixture()
def flow_factory(github: FakeGitHub, tmp_path: Path) -> Iterator[Any]:
    flows: list[SetupFlow] = []

    def make(**overrides: Any) -> SetupFlow:
        options = SetupOptions(**{"webhook_url": "https://gate.acme.test/webhook",
                                  "output": tmp_path / "llmgate-app.env", "org": "acme",
                                  "github_url": github.url, "api_url": f"{github.url}/api/v3",
                                  **overrides})
        flow = SetupFlow(options)
        flow.start()
        flows.append(flow)
        return flow

    yield make
    for flow in flows:
        flow.close()


def browse(page_url: str) -> httpx.Response:
    """Act as the browser: load the local page, submit its form, follow GitHub's redirect."""
    with httpx.Client(follow_redirects=True, timeout=10) as browser:
        page = browser.get(page_url).text
        action = html.unescape(re.search(r"action='([^']*)'", page).group(1))
        manifest = html.unescape(re.search(r"name='manifest' value='([^']*)'", page).group(1))
        return browser.post(action, data={"manifest": manifest})


def read_env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines()
                if line and not line.startswith("#"))


def test_the_whole_flow_registers_under_the_org_and_stores_usable_credentials(github,
                                                                              flow_factory):
    flow = flow_factory()
    answer = browse(flow.url)
    assert answer.status_code == 200 and "App id 4242" in answer.text
    assert github.forms[0]["path"] == "/organizations/acme/settings/apps/new"
    manifest = github.forms[0]["manifest"]
    assert manifest["default_permissions"] == APP_PERMISSIONS
    assert manifest["default_events"] == list(APP_EVENTS)
    assert manifest["hook_attributes"] == {"url": "https://gate.acme.test/webhook",
                                           "active": True}
    assert manifest["redirect_url"] == flow.url + "callback"
    registration = flow.wait(timeout_s=5)
    assert registration.app_id == 4242 and "pem" not in repr(registration)
    output = flow.options.output
    assert stat.S_IMODE(output.stat().st_mode) == 0o600
    env = read_env(output)
    assert env["GITHUB_WEBHOOK_SECRET"] == GITHUB_SECRET
    assert WebSettings.from_env(env).webhook_secret == GITHUB_SECRET
    config = WorkerConfig.from_env({**env, "LLMGATE_WORKDIR": str(output.parent / "w")})
    assert config.app_id == "4242"
    assert config.private_key.strip() == github.private_pem.strip()
    assert github.conversions == ["code0"] and github.hook_configs == []
    auth = AuthSettings.from_env(env)  # "Sign in with GitHub" works without a secret by hand
    assert auth is not None
    assert (auth.client_id, auth.client_secret) == (CLIENT_ID, CLIENT_SECRET)
    assert re.fullmatch(r"[0-9a-f]{64}", auth.session_secret)
    assert CLIENT_SECRET not in repr(registration)


@pytest.mark.parametrize("client_id, client_secret", [
    (None, None), (CLIENT_ID, None), (CLIENT_ID, "has$dollar-and-more-chars"),
    ("Iv1 with space", CLIENT_SECRET)])
def test_without_a_usable_client_secret_sign_in_stays_off_and_the_file_says_so(
        github, flow_factory, client_id, client_secret):
    github.client_id, github.client_secret = client_id, client_secret
    flow = flow_factory()
    assert browse(flow.url).status_code == 200
    text = flow.options.output.read_text()
    env = read_env(flow.options.output)
    assert not any(name.startswith("LLMGATE_") for name in env)
    assert AuthSettings.from_env(env) is None  # sign-in off, the web process starts as before
    assert "# Sign in with GitHub: GitHub returned no usable client secret" in text
    assert WebSettings.from_env(env).webhook_secret == GITHUB_SECRET


def test_a_second_callback_is_refused_and_exchanges_nothing(github, flow_factory):
    flow = flow_factory()
    browse(flow.url)
    again = httpx.get(f"{flow.url}callback", params={"code": "code0", "state": flow.state})
    assert again.status_code == 409
    assert github.conversions == ["code0"]


def test_a_callback_with_another_state_is_refused_before_any_exchange(github, flow_factory):
    flow = flow_factory()
    answer = httpx.get(f"{flow.url}callback", params={"code": "code0", "state": "forged"})
    assert answer.status_code == 400 and "state mismatch" in answer.text
    assert github.conversions == []
    assert not flow.done.is_set()


def test_an_expired_code_fails_with_a_clear_message_and_no_file(github, flow_factory):
    github.expire_codes = True
    flow = flow_factory()
    answer = browse(flow.url)
    assert answer.status_code == 502 and "expire" in answer.text
    with pytest.raises(SetupError, match="404.*expire"):
        flow.wait(timeout_s=5)
    assert not flow.options.output.exists()


@pytest.mark.parametrize("given", [None, "has$dollar-and-more-chars"])
def test_a_missing_or_unsafe_webhook_secret_is_replaced_as_the_app(github, flow_factory, given):
    github.webhook_secret = given
    flow = flow_factory()
    assert browse(flow.url).status_code == 200
    secret = read_env(flow.options.output)["GITHUB_WEBHOOK_SECRET"]
    assert re.fullmatch(r"[0-9a-f]{64}", secret)
    assert github.hook_configs == [{"secret": secret, "content_type": "json"}]
    assert github.jwt_claims[0]["iss"] == "4242"


def test_an_existing_output_file_is_never_overwritten(github, tmp_path):
    output = tmp_path / "llmgate-app.env"
    output.write_text("GITHUB_APP_ID=1\n")
    with pytest.raises(SetupError, match="exists"):
        SetupFlow(SetupOptions(webhook_url="https://x.test/webhook", output=output,
                               github_url=github.url))
    assert output.read_text() == "GITHUB_APP_ID=1\n"


def test_a_bad_organization_name_is_refused(tmp_path):
    with pytest.raises(SetupError, match="organization"):
        SetupFlow(SetupOptions(webhook_url="https://x.test/webhook", org="acme/../x",
                               output=tmp_path / "o.env"))


def test_the_cli_runs_the_flow_and_prints_no_secret(github, tmp_path, capsys):
    port, output = free_port(), tmp_path / "creds.env"
    codes: list[int] = []
    argv = ["setup", "--webhook-url", "https://gate.acme.test/webhook", "--no-browser",
            "--port", str(port), "--output", str(output), "--github-url", github.url,
            "--api-url", f"{github.url}/api/v3"]
    runner = threading.Thread(target=lambda: codes.append(cli_main(argv)))
    runner.start()
    deadline = time.monotonic() + 10
    while True:
        try:
            answer = browse(f"http://127.0.0.1:{port}/")
            break
        except httpx.ConnectError:
            assert time.monotonic() < deadline, "the setup page never came up"
            time.sleep(0.05)
    runner.join(timeout=10)
    assert answer.status_code == 200 and codes == [0]
    printed = capsys.readouterr()
    assert "4242" in printed.out and str(output) in printed.out
    assert github.forms[0]["path"] == "/settings/apps/new"  # no --org: the personal account
    session_secret = read_env(output)["LLMGATE_SESSION_SECRET"]
    for secret in (GITHUB_SECRET, "PRIVATE KEY", CLIENT_SECRET, session_secret):
        assert secret not in printed.out + printed.err
