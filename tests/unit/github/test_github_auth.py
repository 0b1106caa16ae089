"""App JWTs against published vectors, the installation token cache against the fake, and a
client with a given token only (a workflow's ``GITHUB_TOKEN``)."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from tests.conftest import FIXTURES
from tests.fakes.fake_github import FakeGitHubServer
from tests.unit import github_fixtures as fx
from tests.unit.github_fixtures import APP_ID, FAST_RETRIES, INSTALLATION_ID, requests_for
from worker.github.auth import (
    AppCredentials,
    FixedToken,
    GitHubAuthError,
    InstallationTokenCache,
    app_jwt,
)
from worker.github.client import GitHubClient, GitHubError

app_keys, creds, session, client = fx.app_keys, fx.creds, fx.session, fx.client
fake_gh_server, fake_gh = fx.fake_gh_server, fx.fake_gh
VECTORS = json.loads((FIXTURES / "github" / "auth" / "app-jwt-vectors.json").read_text())
#: universal-github-app-jwt backdates iat by 30 s, we by 60 s: shift "now" to get equal claims.
OCTOKIT_BACKDATE_S = 30


def _public_key(pem: str) -> object:
    return serialization.load_pem_private_key(pem.encode(), None).public_key()


@pytest.mark.parametrize("key_field", ["private_key_pkcs1_pem", "private_key_pkcs8_pem"])
@pytest.mark.parametrize("vector", [v for v in VECTORS["vectors"] if isinstance(v["id"], str)],
                         ids=lambda v: f"{v['id']}@{v['now']}")
def test_app_jwt_reproduces_octokit_vectors_byte_for_byte(vector: dict, key_field: str) -> None:
    vector_creds = AppCredentials(vector["id"], VECTORS[key_field])
    now = vector["now"] + 60 - OCTOKIT_BACKDATE_S
    assert app_jwt(vector_creds, now=now) == vector["expected_token"]


@pytest.mark.parametrize("vector", [v for v in VECTORS["vectors"] if isinstance(v["id"], int)],
                         ids=lambda v: f"{v['id']}@{v['now']}")
def test_integer_iss_vectors_differ_only_in_the_type_of_iss(vector: dict) -> None:
    key = _public_key(VECTORS["private_key_pkcs8_pem"])
    vector_creds = AppCredentials(str(vector["id"]), VECTORS["private_key_pkcs8_pem"])
    token = app_jwt(vector_creds, now=vector["now"] + 60 - OCTOKIT_BACKDATE_S)
    ours = jwt.decode(token, key, algorithms=["RS256"], options={"verify_exp": False,
                                                                 "verify_iat": False})
    theirs = jwt.decode(vector["expected_token"], key, algorithms=["RS256"],
                        options={"verify_exp": False, "verify_iat": False})
    assert theirs == vector["claims"]
    assert ours == {**vector["claims"], "iss": str(vector["id"])}


def test_app_jwt_claims_follow_githubs_rules(creds: AppCredentials,
                                             app_keys: tuple[str, str]) -> None:
    token = app_jwt(creds, now=1_700_000_000)
    claims = jwt.decode(token, app_keys[1], algorithms=["RS256"],
                        options={"verify_exp": False, "verify_iat": False})
    assert claims == {"iat": 1_699_999_940, "exp": 1_700_000_540, "iss": APP_ID}
    assert jwt.get_unverified_header(token) == {"alg": "RS256", "typ": "JWT"}


def test_app_jwt_with_a_bad_key_says_what_to_do() -> None:
    with pytest.raises(GitHubAuthError, match="not a valid RSA PEM key"):
        app_jwt(AppCredentials("1", "-----BEGIN RSA PRIVATE KEY-----\nnope\n"))


def test_credentials_repr_hides_the_key(creds: AppCredentials) -> None:
    assert "PRIVATE" not in repr(creds) and creds.private_key not in repr(creds)
    assert APP_ID in repr(creds)


async def test_token_is_minted_once_then_cached(client: GitHubClient,
                                                fake_gh: FakeGitHubServer) -> None:
    first = await client.installation_token()
    second = await client.installation_token()
    state = fake_gh.state()
    assert first == second and first.startswith("ghs_")
    assert [t["token"] for t in state["tokens"]] == [first]
    minted = requests_for(state, "apps/create-installation-access-token")
    assert [r["path"] for r in minted] == [f"/app/installations/{INSTALLATION_ID}/access_tokens"]
    assert state["violations"] == []
    assert first not in repr(client) and first not in repr(client._tokens)


async def test_concurrent_callers_share_one_mint(session: httpx.AsyncClient,
                                                 fake_gh: FakeGitHubServer,
                                                 creds: AppCredentials) -> None:
    cache = InstallationTokenCache(creds)
    gh = GitHubClient(session, fake_gh.url, creds, cache, INSTALLATION_ID)._gh
    tokens = await asyncio.gather(*(cache.get(gh, INSTALLATION_ID) for _ in range(5)))
    assert len(set(tokens)) == 1
    assert len(requests_for(fake_gh.state(), "apps/create-installation-access-token")) == 1


async def test_token_is_replaced_five_minutes_before_it_expires(
        session: httpx.AsyncClient, fake_gh: FakeGitHubServer, creds: AppCredentials) -> None:
    clock = [time.time()]
    cache = InstallationTokenCache(creds, clock=lambda: clock[0])
    gh = GitHubClient(session, fake_gh.url, creds, cache, INSTALLATION_ID)
    first = await gh.installation_token()
    clock[0] += 3600 - 300 - 5  # fake tokens live 3600 s: still inside the window
    assert await gh.installation_token() == first
    clock[0] += 10  # now less than 5 minutes remain
    second = await gh.installation_token()
    assert second != first
    assert len(requests_for(fake_gh.state(), "apps/create-installation-access-token")) == 2


async def test_wrong_app_id_is_refused_by_jwt_verification(
        session: httpx.AsyncClient, fake_gh: FakeGitHubServer, app_keys: tuple[str, str]) -> None:
    wrong = AppCredentials("999", app_keys[0])
    gh = GitHubClient(session, fake_gh.url, wrong, InstallationTokenCache(wrong),
                      INSTALLATION_ID, retry_delays_s=FAST_RETRIES)
    with pytest.raises(GitHubError) as info:
        await gh.installation_token()
    assert info.value.status_code == 401
    assert [v["kind"] for v in fake_gh.state()["violations"]] == ["auth"]


async def test_unknown_installation_is_a_404(client: GitHubClient,
                                             fake_gh: FakeGitHubServer) -> None:
    fake_gh.setup({"installations": [1]})
    with pytest.raises(GitHubError) as info:
        await client.installation_token()
    assert info.value.status_code == 404


async def test_a_fixed_token_client_calls_the_api_with_it_and_mints_nothing(
        session: httpx.AsyncClient, fake_gh: FakeGitHubServer, creds: AppCredentials) -> None:
    minted = await InstallationTokenCache(creds).get(
        GitHubClient(session, fake_gh.url, creds, InstallationTokenCache(creds),
                     INSTALLATION_ID)._gh, INSTALLATION_ID)  # as GitHub mints GITHUB_TOKEN
    gh = GitHubClient(session, fake_gh.url, None, FixedToken(minted), 0)
    comment_id = await gh.create_issue_comment(fx.OWNER, fx.REPO, 3, "hello")
    state = fake_gh.state()
    assert [c["id"] for c in state["comments"]] == [comment_id]
    assert len(requests_for(state, "apps/create-installation-access-token")) == 1  # ours only
    assert requests_for(state, "issues/create-comment")[0]["installation_id"] == INSTALLATION_ID
    assert minted not in repr(gh) + repr(FixedToken(minted))
    assert state["violations"] == []


async def test_a_client_without_app_credentials_cannot_act_as_the_app(
        session: httpx.AsyncClient, fake_gh: FakeGitHubServer) -> None:
    gh = GitHubClient(session, fake_gh.url, None, FixedToken("ghs_given"), 0)
    for call in (gh.get_app, gh.list_installation_ids):
        with pytest.raises(GitHubAuthError, match="authenticates as the GitHub App, but this "
                                                  "client was given a token only"):
            await call()
    assert fake_gh.state()["requests"] == []  # refused before anything was sent
    with pytest.raises(GitHubAuthError, match="empty"):
        FixedToken("")


async def test_a_refused_fixed_token_stays_refused(session: httpx.AsyncClient,
                                                   fake_gh: FakeGitHubServer) -> None:
    gh = GitHubClient(session, fake_gh.url, None, FixedToken("ghs_revoked"), 0)
    for _ in range(2):  # no token to mint in its place: the same token, refused again
        with pytest.raises(GitHubError) as info:
            await gh.update_issue_comment(fx.OWNER, fx.REPO, 1, "x")
        assert info.value.status_code == 401
    assert [r["operation"] for r in fake_gh.state()["requests"]] == ["issues/update-comment"] * 2


def test_an_ec_key_is_refused_as_not_rsa() -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()).decode()
    with pytest.raises(GitHubAuthError, match="not a valid RSA PEM key"):
        app_jwt(AppCredentials("1", pem))


def test_the_app_key_is_parsed_once_per_process(creds: AppCredentials) -> None:
    """Issue 34: PyJWT given the PEM parsed the key at every JWT (150 ms each, loaded)."""
    from worker.github import auth

    auth._signing_key.cache_clear()
    first, second = app_jwt(creds, now=1_700_000_000), app_jwt(creds, now=1_700_000_001)
    assert first != second
    assert (auth._signing_key.cache_info().misses, auth._signing_key.cache_info().hits) == (1, 1)
