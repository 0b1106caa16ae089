"""fly.toml: web and worker process groups from one image, the health check on /healthz, a
kill timeout that covers the worker's drain."""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path

from app.main import create_app
from app.settings import WebSettings
from worker.cli.main import _parser

ROOT = Path(__file__).resolve().parents[3]


def fly() -> dict:
    return tomllib.loads((ROOT / "fly.toml").read_text())


def test_web_and_worker_are_process_groups_of_the_dockerfile_image():
    config = fly()
    assert config["build"]["dockerfile"] == "Dockerfile"
    processes = config["processes"]
    assert set(processes) == {"web", "worker"}
    assert shlex.split(processes["worker"]) == ["llmgate", "worker"]
    web = shlex.split(processes["web"])
    assert web[:2] == ["llmgate", "serve"]
    args = _parser().parse_args(web[1:])
    assert args.port == config["http_service"]["internal_port"]
    assert args.host == "0.0.0.0"


def test_only_the_web_group_gets_http_and_its_check_is_healthz():
    service = fly()["http_service"]
    assert service["processes"] == ["web"]
    assert service["force_https"] is True
    assert service["auto_stop_machines"] == "off"  # a stopped receiver loses deliveries
    checks = service["checks"]
    assert [c["path"] for c in checks] == ["/healthz"]
    routes = {route.path for route in create_app(WebSettings(webhook_secret="x")).routes}
    assert {"/healthz", "/readyz", "/metrics", "/webhook"} <= routes


def test_kill_timeout_covers_the_worker_drain():
    config = fly()
    assert config["kill_signal"] == "SIGTERM"
    grace_s = int(config["env"]["LLMGATE_SHUTDOWN_GRACE_S"])
    assert grace_s + 20 <= config["kill_timeout"] <= 300  # Fly's shared-CPU maximum


def test_each_group_has_a_vm_size():
    assert sorted(vm["processes"][0] for vm in fly()["vm"]) == ["web", "worker"]


def test_fly_scrapes_the_web_process_metrics():
    config = fly()
    (metrics,) = config["metrics"]
    assert metrics["path"] == "/metrics" and metrics["processes"] == ["web"]
    assert metrics["port"] == config["http_service"]["internal_port"]
