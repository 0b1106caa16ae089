"""The GitHub App manifest asks for exactly what the code uses: the events the router handles
and the permissions of the endpoints the GitHub client calls (plus git fetch)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.routes import router
from worker.cli.setup_flow import APP_EVENTS, APP_PERMISSIONS, SetupError, app_manifest

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = ROOT / "deploy" / "app-manifest.json"
PLACEHOLDER_WEBHOOK = "https://llmgate.example.com/webhook"

#: Events every GitHub App receives without subscribing (GitHub docs, "Webhook events and
#: payloads": ping on hook creation; installation* "All GitHub Apps receive this event").
IMPLICIT_EVENTS = {"ping", "installation", "installation_repositories",
                   "github_app_authorization"}
#: Repository permission a subscribed event needs (GitHub docs, each event's "Availability").
EVENT_PERMISSION = {
    "pull_request": ("pull_requests", "read"),
    "pull_request_review": ("pull_requests", "read"),
    "issue_comment": ("issues", "read"),
    "check_run": ("checks", "read"),
    "check_suite": ("checks", "read"),
    "push": ("contents", "read"),
    "merge_group": ("merge_queues", "read"),
}
#: Permission the code needs for each REST path it calls (GitHub docs, each endpoint's
#: "Fine-grained access tokens" section), at the level of the methods the code uses.
PATH_PERMISSION: dict[str, tuple[str, str] | None] = {
    "/app": None,  # app JWT
    "/app/installations/{installation_id}/access_tokens": None,  # app JWT
    "/app/installations": None,  # app JWT (the reconciler, worker/gate/reconcile.py)
    "/installation/repositories": ("metadata", "read"),
    "/repos/{owner}/{repo}/pulls": ("pull_requests", "read"),
    "/repos/{owner}/{repo}/check-runs": ("checks", "write"),
    "/repos/{owner}/{repo}/check-runs/{check_run_id}": ("checks", "write"),
    "/repos/{owner}/{repo}/commits/{ref}/check-runs": ("checks", "read"),
    "/repos/{owner}/{repo}/pulls/{number}": ("pull_requests", "read"),
    "/repos/{owner}/{repo}/collaborators/{username}/permission": ("metadata", "read"),
    "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions": ("issues", "write"),
    "/repos/{owner}/{repo}/issues/{number}/comments": ("issues", "write"),
    "/repos/{owner}/{repo}/issues/comments/{comment_id}": ("issues", "write"),
}
#: git fetch of PR commits over HTTPS with the installation token (worker/checkout.py), and
#: metadata, which every App has.
ALWAYS = {"contents": "read", "metadata": "read"}
_LEVEL = {"read": 1, "write": 2}
_PATH_LITERAL = re.compile(r'"(/(?:app|repos|installation|orgs|user|search)[^"\s]*)"')


def handled_events() -> set[str]:
    """Every event the web process's router has a handler for."""
    return set(router._shallow_routes) | set(router._deep_routes)


def called_paths() -> set[str]:
    """Every REST path literal in the worker's GitHub layer (query strings dropped)."""
    paths = set()
    for source in (ROOT / "worker" / "github").glob("*.py"):
        for match in _PATH_LITERAL.finditer(source.read_text(encoding="utf-8")):
            paths.add(match.group(1).split("?")[0])
    return paths


def _grant(needed: dict[str, str], permission: tuple[str, str] | None) -> None:
    if permission is not None:
        name, level = permission
        if _LEVEL[level] > _LEVEL.get(needed.get(name, ""), 0):
            needed[name] = level


def test_manifest_events_are_exactly_the_routed_events():
    subscribable = handled_events() - IMPLICIT_EVENTS
    assert subscribable, "the router handles no event at all?"
    assert set(APP_EVENTS) == subscribable, (
        f"worker/cli/setup_flow.py APP_EVENTS {sorted(APP_EVENTS)} must equal the events "
        f"app/routes handles {sorted(subscribable)}; then regenerate deploy/app-manifest.json")
    assert "ping" in handled_events()


def test_manifest_permissions_are_exactly_what_the_code_uses():
    paths = called_paths()
    unknown = paths - set(PATH_PERMISSION)
    assert not unknown, (f"the GitHub client calls {sorted(unknown)}: add each to PATH_PERMISSION "
                         "with the permission GitHub documents, and to APP_PERMISSIONS")
    needed = dict(ALWAYS)
    for path in paths:
        _grant(needed, PATH_PERMISSION[path])
    for event in APP_EVENTS:
        assert event in EVENT_PERMISSION, f"add the permission event {event!r} needs"
        _grant(needed, EVENT_PERMISSION[event])
    assert needed == APP_PERMISSIONS


def test_the_scan_finds_the_calls_it_must_find():
    # if the client were rewritten so the literals moved, the scan would find nothing
    assert {"/repos/{owner}/{repo}/check-runs", "/repos/{owner}/{repo}/issues/{number}/comments",
            "/app/installations/{installation_id}/access_tokens"} <= called_paths()


def test_deploy_manifest_file_is_the_generated_one():
    on_disk = json.loads(MANIFEST.read_text(encoding="utf-8"))
    generated = app_manifest(name="llmgate", webhook_url=PLACEHOLDER_WEBHOOK,
                             redirect_url="http://127.0.0.1/callback")
    assert on_disk == generated, (f"regenerate: llmgate setup --webhook-url {PLACEHOLDER_WEBHOOK}"
                                  " --print-manifest > deploy/app-manifest.json")
    assert on_disk["hook_attributes"] == {"url": PLACEHOLDER_WEBHOOK, "active": True}
    assert on_disk["public"] is False
    assert set(on_disk) >= {"name", "url", "hook_attributes", "redirect_url",
                            "default_permissions", "default_events"}


@pytest.mark.parametrize("url", ["llmgate.example.com/webhook", "ftp://x/webhook", ""])
def test_a_webhook_url_that_is_not_absolute_http_is_refused(url):
    with pytest.raises(SetupError, match="absolute https URL"):
        app_manifest(name="llmgate", webhook_url=url, redirect_url="http://127.0.0.1/cb")


def test_an_app_name_longer_than_githubs_limit_is_refused():
    with pytest.raises(SetupError, match="34 characters"):
        app_manifest(name="x" * 35, webhook_url=PLACEHOLDER_WEBHOOK, redirect_url="http://a/cb")
