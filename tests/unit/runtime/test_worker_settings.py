"""Worker settings from the environment: every bad value is one line naming the variable.

The same cases, as real ``arq``/``llmgate worker`` processes, are in
``tests/e2e/test_processes_e2e.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.fakes.fake_github import generate_app_keypair
from worker import contract
from worker.main import JOB_TIMEOUT_S, worker_settings
from worker.runtime.settings import DEFAULT_API_URL, SettingsError, WorkerConfig

ROOT = Path(__file__).resolve().parents[3]
PRIVATE_PEM, _ = generate_app_keypair()

NO_KEY = "GITHUB_APP_PRIVATE_KEY (PEM text) or GITHUB_APP_PRIVATE_KEY_FILE (path) must be set"
NOT_PEM = "GITHUB_APP_PRIVATE_KEY is not a PEM private key without a passphrase"
API_URL = f"GITHUB_API_URL must be an http(s) URL, e.g. {DEFAULT_API_URL}"
REDIS_SCHEME = "REDIS_URL must be a redis://, rediss:// or unix:// URL"


def good_env(tmp_path: Path) -> dict[str, str]:
    return {"GITHUB_APP_ID": "4242", "GITHUB_APP_PRIVATE_KEY": PRIVATE_PEM,
            "REDIS_URL": "redis://127.0.0.1:6379/2", "LLMGATE_WORKDIR": str(tmp_path / "w")}


def other_keys() -> dict[str, str]:
    ec_key = ec.generate_private_key(ec.SECP256R1())
    plain = serialization.NoEncryption()
    locked = serialization.BestAvailableEncryption(b"passphrase")
    pkcs8 = serialization.PrivateFormat.PKCS8
    return {
        "ec": ec_key.private_bytes(serialization.Encoding.PEM, pkcs8, plain).decode(),
        "encrypted": ec_key.private_bytes(serialization.Encoding.PEM, pkcs8, locked).decode(),
    }


def test_reads_every_variable(tmp_path):
    key_file = tmp_path / "app.pem"
    key_file.write_text(PRIVATE_PEM)
    env = good_env(tmp_path) | {"GITHUB_APP_PRIVATE_KEY": "", "GITHUB_APP_ID": " 4242 ",
                                "GITHUB_APP_PRIVATE_KEY_FILE": str(key_file),
                                "GITHUB_API_URL": "https://ghe.example.com/api/v3/",
                                "LLMGATE_MAX_JOBS": "8"}
    config = WorkerConfig.from_env(env)
    assert (config.app_id, config.api_url, config.redis_url, config.workdir, config.max_jobs) == (
        "4242", "https://ghe.example.com/api/v3", "redis://127.0.0.1:6379/2", tmp_path / "w", 8)
    assert config.private_key == PRIVATE_PEM
    assert "PRIVATE KEY" not in repr(config)
    assert config.cache_redis_url == config.redis_url  # unset: the cache shares the queue's
    cached = WorkerConfig.from_env(env | {"LLMGATE_CACHE_REDIS_URL": " redis://cache:6380/1 "})
    assert (cached.redis_url, cached.cache_redis_url) == ("redis://127.0.0.1:6379/2",
                                                          "redis://cache:6380/1")


def test_defaults_and_escaped_newlines(tmp_path):
    env = {"GITHUB_APP_ID": "1", "GITHUB_APP_PRIVATE_KEY": PRIVATE_PEM.replace("\n", "\\n"),
           "GITHUB_API_URL": "", "REDIS_URL": "", "LLMGATE_MAX_JOBS": ""}
    config = WorkerConfig.from_env(env)
    assert (config.api_url, config.redis_url, config.max_jobs) == (
        "https://api.github.com", "redis://localhost:6379/0", 4)
    assert config.workdir == Path.home() / ".cache" / "llmgate"
    assert config.private_key == PRIVATE_PEM


@pytest.mark.parametrize(("change", "message"), [
    ({"GITHUB_APP_ID": None}, "GITHUB_APP_ID must be set to the App's numeric id"),
    ({"GITHUB_APP_ID": "my-app"}, "GITHUB_APP_ID must be set to the App's numeric id"),
    ({"GITHUB_APP_ID": "４２"}, "GITHUB_APP_ID must be set to the App's numeric id"),
    ({"GITHUB_APP_PRIVATE_KEY": None}, NO_KEY),
    ({"GITHUB_APP_PRIVATE_KEY": ""}, NO_KEY),
    ({"GITHUB_APP_PRIVATE_KEY": "garbage"}, NOT_PEM),
    ({"GITHUB_APP_PRIVATE_KEY": PRIVATE_PEM[:200]}, NOT_PEM),
    ({"GITHUB_APP_PRIVATE_KEY": "encrypted"}, NOT_PEM),
    ({"GITHUB_APP_PRIVATE_KEY": "ec"},
     "GITHUB_APP_PRIVATE_KEY must be the GitHub App's RSA private key"),
    ({"GITHUB_API_URL": "api.github.com"}, API_URL),
    ({"GITHUB_API_URL": "ftp://ghe.example.com/api/v3"}, API_URL),
    ({"GITHUB_API_URL": "https://"}, API_URL),
    ({"GITHUB_API_URL": "https://ghe:https/api/v3"},
     "GITHUB_API_URL has a malformed port (digits, 0-65535)"),
    ({"REDIS_URL": "http://127.0.0.1:6379/0"}, REDIS_SCHEME),
    ({"REDIS_URL": "127.0.0.1:6379"}, REDIS_SCHEME),
    ({"REDIS_URL": "redis://:hunter2@h:port/0"},
     "REDIS_URL has a malformed port (digits, 0-65535)"),
    ({"REDIS_URL": "redis://h:6379/zero"},
     "REDIS_URL database (the path after the host) must be a number"),
    ({"LLMGATE_CACHE_REDIS_URL": "http://127.0.0.1:6380/0"},
     "LLMGATE_CACHE_REDIS_URL must be a redis://, rediss:// or unix:// URL"),
    ({"LLMGATE_CACHE_REDIS_URL": "redis://:hunter2@h:port/0"},
     "LLMGATE_CACHE_REDIS_URL has a malformed port (digits, 0-65535)"),
    ({"LLMGATE_CACHE_REDIS_URL": "redis://h:6380/cache"},
     "LLMGATE_CACHE_REDIS_URL database (the path after the host) must be a number"),
    ({"LLMGATE_MAX_JOBS": "four"}, "LLMGATE_MAX_JOBS must be a whole number of jobs, at least 1"),
    ({"LLMGATE_MAX_JOBS": "0"}, "LLMGATE_MAX_JOBS must be a whole number of jobs, at least 1"),
])
def test_bad_setting_is_one_line_naming_it(tmp_path, change, message):
    keys = other_keys()
    env = good_env(tmp_path)
    for name, value in change.items():
        if value is None:
            env.pop(name)
        else:
            env[name] = keys.get(value, value)
    with pytest.raises(SettingsError) as caught:
        WorkerConfig.from_env(env)
    assert str(caught.value) == message
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(("content", "message"), [
    (None, "GITHUB_APP_PRIVATE_KEY_FILE cannot be read: No such file or directory"),
    ("dir", "GITHUB_APP_PRIVATE_KEY_FILE cannot be read: Is a directory"),
    (b"\xff\xfe\x00garbage", "GITHUB_APP_PRIVATE_KEY_FILE is not a PEM text file"),
    (b"-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n",
     "GITHUB_APP_PRIVATE_KEY_FILE is not a PEM private key without a passphrase"),
])
def test_bad_key_file(tmp_path, content, message):
    path = tmp_path / "key.pem"
    if content == "dir":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    env = good_env(tmp_path) | {"GITHUB_APP_PRIVATE_KEY": "",
                                "GITHUB_APP_PRIVATE_KEY_FILE": str(path)}
    with pytest.raises(SettingsError, match="^" + message + "$"):
        WorkerConfig.from_env(env)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_key_file(tmp_path):
    path = tmp_path / "key.pem"
    path.write_text(PRIVATE_PEM)
    path.chmod(0)
    env = good_env(tmp_path) | {"GITHUB_APP_PRIVATE_KEY": "",
                                "GITHUB_APP_PRIVATE_KEY_FILE": str(path)}
    with pytest.raises(SettingsError, match="^GITHUB_APP_PRIVATE_KEY_FILE cannot be read: "
                                            "Permission denied$"):
        WorkerConfig.from_env(env)


def test_worker_settings_carry_the_checked_values(tmp_path):
    settings = worker_settings(good_env(tmp_path) | {"LLMGATE_MAX_JOBS": "2"})
    redis = settings.redis_settings
    assert (redis.host, redis.port, redis.database) == ("127.0.0.1", 6379, 2)
    assert settings.max_jobs == 2
    assert settings.job_timeout == JOB_TIMEOUT_S
    # every job name the web process may enqueue (worker.contract.JOB_*) has a function
    job_names = {v for k, v in vars(contract).items() if k.startswith("JOB_")}
    assert {f.__name__ for f in settings.functions} == job_names
    assert {"gate_pull_request", "rerun_from_comment"} <= job_names
    assert (tmp_path / "w").is_dir()  # created at start-up, not on the first job


def test_workdir_that_cannot_be_created(tmp_path):
    (tmp_path / "file").write_text("")
    env = good_env(tmp_path) | {"LLMGATE_WORKDIR": str(tmp_path / "file" / "work")}
    with pytest.raises(SettingsError, match="^LLMGATE_WORKDIR cannot be created: Not a directory$"):
        worker_settings(env)


def test_importing_the_worker_reads_no_environment():
    """Only ``worker.main.WorkerSettings`` (what arq asks for) checks the settings."""
    code = "import worker.main, worker.cli.main; print(worker.main.JOB_TIMEOUT_S)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env={"PATH": os.environ["PATH"]}, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{JOB_TIMEOUT_S}\n", "")
