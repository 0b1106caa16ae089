"""Every environment variable the code reads is documented, and the deploy files set only those.

The variables are found by scanning app/ and worker/ for ``environ.get("X")``, ``env["X"]``
and the like, so a new variable that nobody documented fails here.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = ROOT / "deploy" / "README.md"
_READ = re.compile(r'(?:environ|env|os)\s*(?:\.get\(|\.getenv\(|\[)\s*"([A-Z][A-Z0-9_]*)"'
                   r'(?!\]\s*=[^=])')  # not an assignment: the code setting a library's switch
#: Any complete string literal naming one of llmgate's variables (read through a helper).
_NAMED = re.compile(r'"((?:LLMGATE|GITHUB|REDIS)_[A-Z0-9_]+)"')
#: The operating system's, not llmgate's settings.
SYSTEM = {"HOME", "PATH", "LANG", "LC_ALL", "TMPDIR", "USER", "SHELL"}
#: What each process cannot start without (app/settings.py, worker/runtime/settings.py).
WEB_REQUIRED = {"GITHUB_WEBHOOK_SECRET", "REDIS_URL"}
WORKER_REQUIRED = {"GITHUB_APP_ID", "GITHUB_APP_PRIVATE_KEY", "REDIS_URL"}
#: Only the worker may hold these: the web process never needs the App's key.
WORKER_ONLY = {"GITHUB_APP_PRIVATE_KEY", "GITHUB_APP_PRIVATE_KEY_FILE"}


def code_env_vars() -> set[str]:
    """Every llmgate setting (environment variable) read somewhere in app/ or worker/."""
    names: set[str] = set()
    for package in ("app", "worker"):
        for source in (ROOT / package).rglob("*.py"):
            text = source.read_text(encoding="utf-8")
            names.update(_READ.findall(text), _NAMED.findall(text))
    return names - SYSTEM


def documented_env_vars() -> set[str]:
    """Variables named in the first column of deploy/README.md's configuration table."""
    return set(re.findall(r"^\| `([A-Z][A-Z0-9_]*)`", REFERENCE.read_text(encoding="utf-8"),
                          re.MULTILINE))


def compose_services() -> dict[str, dict]:
    return yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())["services"]


def k8s_docs() -> list[dict]:
    docs = []
    for path in sorted((ROOT / "deploy" / "k8s").glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def test_the_scan_finds_the_variables_it_must_find():
    assert {"GITHUB_WEBHOOK_SECRET", "REDIS_URL", "GITHUB_APP_ID", "GITHUB_APP_PRIVATE_KEY",
            "LLMGATE_READY_MAX_QUEUE_DEPTH", "LLMGATE_SHUTDOWN_GRACE_S"} <= code_env_vars()


def test_every_variable_the_code_reads_is_in_the_configuration_reference():
    missing = code_env_vars() - documented_env_vars()
    assert not missing, f"document {sorted(missing)} in deploy/README.md's configuration table"


def test_the_reference_documents_no_variable_the_code_does_not_read():
    stale = documented_env_vars() - code_env_vars()
    assert not stale, f"deploy/README.md documents {sorted(stale)}, which no code reads"


def test_compose_sets_only_known_variables_and_keeps_the_key_from_the_web():
    known = code_env_vars()
    services = compose_services()
    for name in ("web", "worker"):
        env = set(services[name]["environment"])
        assert env <= known, f"compose {name} sets unknown {sorted(env - known)}"
    assert set(services["web"]["environment"]) >= WEB_REQUIRED
    assert set(services["worker"]["environment"]) >= WORKER_REQUIRED
    assert not WORKER_ONLY & set(services["web"]["environment"])


def test_kubernetes_sets_only_known_variables_and_keeps_the_key_from_the_web():
    known = code_env_vars()
    config = next(d for d in k8s_docs() if d["kind"] == "ConfigMap")["data"]
    assert set(config) <= known, f"ConfigMap sets unknown {sorted(set(config) - known)}"
    assert not WORKER_ONLY & set(config), "the App key must come from the worker's Secret"
    for doc in k8s_docs():
        if doc["kind"] != "Deployment":
            continue
        for container in doc["spec"]["template"]["spec"]["containers"]:
            names = {e["name"] for e in container.get("env", [])}
            assert names <= known, f"{doc['metadata']['name']} sets unknown {names - known}"


def test_fly_sets_only_known_variables_and_names_every_required_secret():
    text = (ROOT / "fly.toml").read_text()
    env = set(tomllib.loads(text)["env"])
    assert env <= code_env_vars(), f"fly.toml [env] sets unknown {sorted(env - code_env_vars())}"
    secrets_block = text.split("# Secrets", 1)[1].split("\napp =", 1)[0]
    named = set(re.findall(r"^#\s+([A-Z][A-Z0-9_]+)\s", secrets_block, re.MULTILINE))
    assert (WEB_REQUIRED | WORKER_REQUIRED) - {"REDIS_URL"} <= named
    assert "REDIS_URL" in named
    assert named <= code_env_vars()
    assert not named & env, "a secret must not get a value in fly.toml [env]"
