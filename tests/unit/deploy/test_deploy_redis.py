"""The deploy files are safe by default (issue 14): the queue's Redis has a password, only
llmgate's processes reach it, it never evicts and stays below its memory limit, it keeps an
append-only file; the Kubernetes Ingress serves ``/reports/`` exactly when the Details link is
on; Fly's steps say which Redis settings to choose; the evicting cache Redis is offered."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.unit.deploy.test_deploy_compose import COMPOSE, services
from tests.unit.deploy.test_deploy_k8s import K8S, container, objects

ROOT = Path(__file__).resolve().parents[3]
#: Share of the memory limit ``maxmemory`` may take: the rest is for the fork of an AOF
#: rewrite (copy-on-write) and client buffers, which Redis does not count in maxmemory.
MAX_SHARE = 0.8
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2, "g": 1000**3,
          "gb": 1024**3}
_K8S_UNITS = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "K": 1000, "M": 1000**2, "G": 1000**3}
_DOCKER_UNITS = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def amount(pattern: str, value: str, units: dict[str, int]) -> int:
    """``value`` (a number and a unit matching ``pattern``'s two groups) in bytes."""
    match = re.fullmatch(pattern, value)
    assert match is not None, value
    return int(match[1]) * units[match[2] or ""]


def redis_bytes(value: str) -> int:
    """``maxmemory`` as Redis reads it (redis.conf: ``1mb`` is 1024*1024 bytes, ``1m`` 10^6)."""
    return amount(r"(\d+)([a-z]*)", value.lower(), _UNITS)


def option(args: list[str], name: str) -> str:
    """The value after ``--name`` in a redis-server command line."""
    return args[args.index(f"--{name}") + 1]


def assert_safe_redis_args(args: list[str], limit_bytes: int) -> None:
    assert option(args, "maxmemory-policy") == "noeviction"
    assert 0 < redis_bytes(option(args, "maxmemory")) <= MAX_SHARE * limit_bytes
    assert option(args, "appendonly") == "yes"
    assert option(args, "requirepass")


# ---------------------------------------------------------------- docker compose
def test_compose_redis_needs_the_password_that_web_and_workers_send() -> None:
    svc = services()
    password = option(svc["redis"]["command"], "requirepass")
    assert password.startswith("${REDIS_PASSWORD:?")  # compose refuses to start without it
    for name in ("web", "worker"):
        url = urlsplit(svc[name]["environment"]["REDIS_URL"].replace(password, "PASSWORD"))
        assert (url.password, url.hostname, url.port) == ("PASSWORD", "redis", 6379)
    assert svc["redis"]["environment"]["REDISCLI_AUTH"] == password  # the health check logs in
    assert "PONG" in svc["redis"]["healthcheck"]["test"][1]  # an auth error is not healthy


def test_compose_redis_is_on_an_internal_network_only_web_and_workers_join() -> None:
    svc = services()
    networks = yaml.safe_load(COMPOSE.read_text())["networks"]
    (queue,) = svc["redis"]["networks"]
    assert networks[queue]["internal"] is True
    assert {name for name, s in svc.items() if queue in s.get("networks", [])} == {
        "web", "worker", "redis"}
    assert "ports" not in svc["redis"]


def test_compose_redis_never_evicts_stays_below_its_limit_and_persists() -> None:
    redis = services()["redis"]
    limit = amount(r"(\d+)([bkmg])", redis["mem_limit"], _DOCKER_UNITS)  # docker: m is MiB
    assert_safe_redis_args(redis["command"], limit)


def test_compose_offers_an_evicting_cache_redis_commented_out() -> None:
    text = COMPOSE.read_text()
    assert re.search(r"^\s+# LLMGATE_CACHE_REDIS_URL: redis://.*@cache-redis:6379", text,
                     re.MULTILINE)
    assert re.search(r"^\s+# cache-redis:", text, re.MULTILINE) and "allkeys-lru" in text


# ---------------------------------------------------------------- Kubernetes
def redis_container() -> dict[str, Any]:
    return objects()[("StatefulSet", "llmgate-redis")]["spec"]["template"]["spec"][
        "containers"][0]


def k8s_bytes(value: str) -> int:
    return amount(r"(\d+)([KMG]i?)?", value, {"": 1, **_K8S_UNITS})


def test_k8s_redis_requires_the_password_of_a_secret_and_no_url_sits_in_the_configmap() -> None:
    redis = redis_container()
    assert option(redis["args"], "requirepass") == "$(REDIS_PASSWORD)"
    env = {e["name"]: e for e in redis["env"]}
    assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "llmgate-redis", "key": "REDIS_PASSWORD"}
    assert env["REDISCLI_AUTH"]["value"] == "$(REDIS_PASSWORD)"  # the probe logs in
    assert "PONG" in redis["readinessProbe"]["exec"]["command"][-1]
    config = objects()[("ConfigMap", "llmgate-config")]["data"]
    assert "REDIS_URL" not in config  # it carries the password: it is in the Secrets
    readme = (ROOT / "docs" / "install.md").read_text()
    for secret in ("llmgate-web", "llmgate-worker"):
        assert f'generic {secret} --from-literal=REDIS_URL="$REDIS_URL"' in readme
    assert 'REDIS_URL="redis://:$REDIS_PASSWORD@llmgate-redis:6379/0"' in readme


def test_k8s_only_web_and_worker_pods_reach_redis() -> None:
    found = objects()
    policy = found[("NetworkPolicy", "llmgate-redis")]["spec"]
    redis_labels = found[("StatefulSet", "llmgate-redis")]["spec"]["template"]["metadata"][
        "labels"]
    assert policy["podSelector"]["matchLabels"].items() <= redis_labels.items()
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    (peer,) = rule["from"]
    assert set(peer) == {"podSelector"}  # pods of this namespace only, no namespaces, no IPs
    (expression,) = peer["podSelector"]["matchExpressions"]
    allowed = {(expression["key"], value) for value in expression["values"]}
    assert expression["operator"] == "In"
    pods = {name: found[("Deployment", name)]["spec"]["template"]["metadata"]["labels"]
            for name in ("llmgate-web", "llmgate-worker")}
    assert all(allowed & set(labels.items()) for labels in pods.values())
    assert rule["ports"] == [{"port": "redis", "protocol": "TCP"}]
    assert redis_container()["ports"][0]["name"] == "redis"


def test_k8s_redis_never_evicts_stays_below_its_limit_and_persists() -> None:
    redis = redis_container()
    assert_safe_redis_args(redis["args"], k8s_bytes(redis["resources"]["limits"]["memory"]))


def _component_patches() -> list[tuple[dict[str, str], list[dict[str, Any]]]]:
    component = yaml.safe_load((K8S / "details-link" / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    return [(p["target"], yaml.safe_load(p["patch"])) for p in component["patches"]]


def _apply_adds(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply JSON Patch (RFC 6902) ``add`` operations, the only kind the component uses."""
    doc = copy.deepcopy(doc)
    for op in ops:
        assert op["op"] == "add"
        *parents, last = op["path"].lstrip("/").split("/")
        node: Any = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if last == "-":
            node.append(op["value"])
        else:
            node[last] = op["value"]
    return doc


def _details(found: dict[tuple[str, str], dict[str, Any]]) -> tuple[list[str], str | None, str]:
    """The Ingress's paths, the workers' LLMGATE_PUBLIC_URL and the Ingress's host."""
    ingress = found[("Ingress", "llmgate-web")]["spec"]
    paths = [p["path"] for rule in ingress["rules"] for p in rule["http"]["paths"]]
    public_url = found[("ConfigMap", "llmgate-config")]["data"].get("LLMGATE_PUBLIC_URL")
    return paths, public_url, ingress["rules"][0]["host"]


def test_k8s_ingress_serves_reports_exactly_when_the_details_link_is_on() -> None:
    found = objects()
    assert _details(found)[:2] == (["/webhook"], None)  # off by default: only the webhook
    for target, ops in _component_patches():
        key = (target["kind"], target["name"])
        found[key] = _apply_adds(found[key], ops)
    paths, public_url, host = _details(found)
    assert paths == ["/webhook", "/reports/"]
    assert public_url is not None and urlsplit(public_url).hostname == host
    reports = found[("Ingress", "llmgate-web")]["spec"]["rules"][0]["http"]["paths"][1]
    assert reports["pathType"] == "Prefix"
    assert reports["backend"] == {"service": {"name": "llmgate-web", "port": {"name": "http"}}}
    assert "# components:\n#   - details-link" in (K8S / "kustomization.yaml").read_text()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_kustomize_renders_the_details_link_component(tmp_path: Path) -> None:
    copy_dir = tmp_path / "k8s"
    shutil.copytree(K8S, copy_dir)
    kustomization = copy_dir / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text().replace(
        "# components:\n#   - details-link", "components:\n  - details-link"))
    for folder, expected in ((K8S, ["/webhook"]), (copy_dir, ["/webhook", "/reports/"])):
        out = subprocess.run(["kubectl", "kustomize", str(folder)], capture_output=True,
                             text=True, timeout=60, check=True).stdout
        found = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out) if d}
        paths, public_url, host = _details(found)
        assert paths == expected
        assert (public_url is None) == (expected == ["/webhook"])
        assert public_url is None or urlsplit(public_url).hostname == host


def test_k8s_mentions_the_evicting_cache_redis() -> None:
    text = (K8S / "config.yaml").read_text()
    assert re.search(r"^# .*LLMGATE_CACHE_REDIS_URL", text, re.MULTILINE)
    assert "allkeys-lru" in text
    assert container("llmgate-worker")["envFrom"]  # the Secrets it would go in


# ---------------------------------------------------------------- Fly.io
def test_fly_steps_say_which_redis_settings_to_choose() -> None:
    steps = (ROOT / "fly.toml").read_text().split("# Secrets", 1)[0]
    assert "No to eviction" in steps and "maxmemory-policy noeviction" in steps
    for setting in ("requirepass", "appendonly yes", "maxmemory below"):
        assert setting in steps
    assert "LLMGATE_CACHE_REDIS_URL" in steps
