"""deploy/k8s: the objects parse, have what a deployment needs (probes on real routes, resource
requests, non-root, drain times), and validate against Kubernetes' own schemas when
kubernetes-validate is installed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from app.main import create_app
from app.settings import WebSettings
from worker.cli.main import _parser

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "deploy" / "k8s"
#: The Kubernetes release the manifests are checked against (API versions in use since 1.25).
K8S_VERSION = "1.30.0"


def objects() -> dict[tuple[str, str], dict]:
    found = {}
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                found[(doc["kind"], doc["metadata"]["name"])] = doc
    return found


def pod(name: str) -> dict:
    return objects()[("Deployment", name)]["spec"]["template"]["spec"]


def container(name: str) -> dict:
    return pod(name)["containers"][0]


def test_kustomization_lists_every_manifest():
    listed = set(yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"])
    assert listed == {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}


def test_the_expected_objects_exist():
    assert {("Deployment", "llmgate-web"), ("Service", "llmgate-web"),
            ("Deployment", "llmgate-worker"), ("HorizontalPodAutoscaler", "llmgate-worker"),
            ("StatefulSet", "llmgate-redis"), ("Service", "llmgate-redis"),
            ("ConfigMap", "llmgate-config"), ("Ingress", "llmgate-web")} <= set(objects())


def test_both_deployments_run_the_one_image_by_command_with_requests_and_non_root():
    for name, command in (("llmgate-web", "serve"), ("llmgate-worker", "worker")):
        spec = container(name)
        assert spec["image"] == "llmgate"  # set by kustomize's images:
        assert spec["command"][:2] == ["llmgate", command]
        _parser().parse_args(spec["command"][1:])
        assert {"cpu", "memory"} <= set(spec["resources"]["requests"])
        assert "memory" in spec["resources"]["limits"]
        assert pod(name)["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["allowPrivilegeEscalation"] is False


def test_web_probes_hit_real_routes_and_the_service_targets_its_port():
    routes = {route.path for route in create_app(WebSettings(webhook_secret="x")).routes}
    web = container("llmgate-web")
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {"/healthz", "/readyz"} <= routes
    port = web["ports"][0]
    service = objects()[("Service", "llmgate-web")]["spec"]
    assert service["ports"][0]["targetPort"] == port["name"]
    assert service["selector"] == objects()[("Deployment", "llmgate-web")]["spec"]["selector"][
        "matchLabels"]
    assert "--port" in web["command"]
    assert int(web["command"][web["command"].index("--port") + 1]) == port["containerPort"]


def test_workers_scale_horizontally_and_drain_before_they_are_killed():
    hpa = objects()[("HorizontalPodAutoscaler", "llmgate-worker")]["spec"]
    assert hpa["scaleTargetRef"]["name"] == "llmgate-worker"
    assert hpa["maxReplicas"] > hpa["minReplicas"] >= 2
    config = objects()[("ConfigMap", "llmgate-config")]["data"]
    grace_s = int(config["LLMGATE_SHUTDOWN_GRACE_S"])
    assert pod("llmgate-worker")["terminationGracePeriodSeconds"] >= grace_s + 20
    assert container("llmgate-worker")["livenessProbe"]["exec"]["command"] == [
        "llmgate", "healthcheck"]
    assert pod("llmgate-web")["terminationGracePeriodSeconds"] >= 25


def test_secrets_are_referenced_by_name_never_inlined():
    assert not any(kind == "Secret" for kind, _ in objects())
    refs = {r["secretRef"]["name"] for name in ("llmgate-web", "llmgate-worker")
            for r in container(name)["envFrom"] if "secretRef" in r}
    assert refs == {"llmgate-web", "llmgate-worker"}
    web_refs = [r["secretRef"]["name"] for r in container("llmgate-web")["envFrom"]
                if "secretRef" in r]
    assert web_refs == ["llmgate-web"]  # the App's private key is the worker's only


def test_only_the_webhook_is_public():
    rules = objects()[("Ingress", "llmgate-web")]["spec"]["rules"]
    paths = [p["path"] for rule in rules for p in rule["http"]["paths"]]
    assert paths == ["/webhook"]


def test_redis_persists():
    redis = objects()[("StatefulSet", "llmgate-redis")]["spec"]
    args = redis["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--appendonly") + 1] == "yes"
    assert redis["volumeClaimTemplates"][0]["metadata"]["name"] == "data"


@pytest.mark.skipif(importlib.util.find_spec("kubernetes_validate") is None,
                    reason="kubernetes-validate not installed")
def test_every_object_validates_against_the_kubernetes_schema():
    import kubernetes_validate

    for doc in objects().values():
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    broken = next(yaml.safe_load_all((K8S / "web.yaml").read_text()))
    broken["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)
