"""WebSettings: strict reading of the environment, masked repr, and a clean start-up failure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.settings import DEFAULT_MAX_BODY_BYTES, SettingsError, WebSettings

ROOT = Path(__file__).parents[3]


def test_defaults_apply_when_only_the_secret_is_set() -> None:
    settings = WebSettings.from_env({"GITHUB_WEBHOOK_SECRET": "s3cret"})
    assert settings.webhook_secret == "s3cret"
    assert settings.redis_url == "redis://localhost:6379/0"
    assert settings.max_body_bytes == DEFAULT_MAX_BODY_BYTES == 26_214_400


def test_values_are_read_from_the_environment() -> None:
    settings = WebSettings.from_env({
        "GITHUB_WEBHOOK_SECRET": "s3cret", "REDIS_URL": "unix:///run/redis.sock",
        "LLMGATE_MAX_BODY_BYTES": "1024"})
    assert (settings.redis_url, settings.max_body_bytes) == ("unix:///run/redis.sock", 1024)


@pytest.mark.parametrize("environ, variable", [
    ({}, "GITHUB_WEBHOOK_SECRET"),
    ({"GITHUB_WEBHOOK_SECRET": "  "}, "GITHUB_WEBHOOK_SECRET"),
    ({"GITHUB_WEBHOOK_SECRET": "s", "REDIS_URL": "http://localhost:6379"}, "REDIS_URL"),
    ({"GITHUB_WEBHOOK_SECRET": "s", "REDIS_URL": "localhost:6379"}, "REDIS_URL"),
    ({"GITHUB_WEBHOOK_SECRET": "s", "REDIS_URL": "redis://h:port/0"}, "REDIS_URL"),
    ({"GITHUB_WEBHOOK_SECRET": "s", "REDIS_URL": "redis://h:6379/zero"}, "REDIS_URL"),
    ({"GITHUB_WEBHOOK_SECRET": "s", "REDIS_URL": "unix://"}, "REDIS_URL"),
    ({"GITHUB_WEBHOOK_SECRET": "s", "LLMGATE_MAX_BODY_BYTES": "25MB"}, "LLMGATE_MAX_BODY_BYTES"),
    ({"GITHUB_WEBHOOK_SECRET": "s", "LLMGATE_MAX_BODY_BYTES": "-1"}, "LLMGATE_MAX_BODY_BYTES"),
    ({"GITHUB_WEBHOOK_SECRET": "s", "LLMGATE_MAX_BODY_BYTES": "0"}, "LLMGATE_MAX_BODY_BYTES"),
])
def test_missing_or_malformed_variable_raises_one_line_naming_it(
        environ: dict[str, str], variable: str) -> None:
    with pytest.raises(SettingsError) as caught:
        WebSettings.from_env(environ)
    message = str(caught.value)
    assert message.startswith(variable)
    assert "\n" not in message


def test_error_never_echoes_a_redis_password() -> None:
    with pytest.raises(SettingsError) as caught:
        WebSettings.from_env({"GITHUB_WEBHOOK_SECRET": "s", "REDIS_URL": "http://u:hunter2@h/0"})
    assert "hunter2" not in str(caught.value)


def test_repr_masks_the_secret_and_the_redis_password() -> None:
    settings = WebSettings("very-secret-value", "redis://user:hunter2@redis.internal:6380/2")
    shown = repr(settings)
    assert "very-secret-value" not in shown
    assert "hunter2" not in shown
    assert "redis://user:**********@redis.internal:6380/2" in shown


def _uvicorn(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "uvicorn", "app.main:app", "--port", "0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)


def test_uvicorn_without_the_secret_exits_2_with_one_line() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_WEBHOOK_SECRET"}
    result = _uvicorn(env)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "llmgate web: configuration error: GITHUB_WEBHOOK_SECRET is not set or empty: "
        "set it to the GitHub App's webhook secret"]


def test_uvicorn_with_a_bad_redis_url_exits_2_with_one_line() -> None:
    result = _uvicorn(os.environ | {"GITHUB_WEBHOOK_SECRET": "s", "REDIS_URL": "mysql://db/1"})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "REDIS_URL" in lines[0]


@pytest.mark.parametrize(("url", "said"), [
    ("notaurl", "(it has no scheme)"),
    ("http://localhost:6379", "(got http://)"),
])
def test_wrong_redis_scheme_says_what_was_given(url: str, said: str) -> None:
    with pytest.raises(SettingsError) as caught:
        WebSettings.from_env({"GITHUB_WEBHOOK_SECRET": "s", "REDIS_URL": url})
    assert str(caught.value) == (
        f"REDIS_URL must start with redis://, rediss:// or unix:// {said}")
