"""Typed reads of the few webhook payload fields the handlers need.

Payloads arrive as parsed JSON (``Any``); these helpers turn a field into a checked ``str`` or
``int`` or raise ``PayloadError`` naming the dotted path, which the receiver answers with 400.
Identifiers that the worker hands to git or puts in URLs are checked against tight patterns.
"""

from __future__ import annotations

import re
from typing import Any

from app.routes.decision import Decision
from worker.contract import RepoRef

#: A commit SHA as GitHub sends it in webhooks: 40 lowercase hex digits (SHA-1 repositories).
SHA_PATTERN = re.compile(r"[0-9a-f]{40}")
#: Owner logins and repository names: GitHub allows letters, digits, ``-``, ``_`` and ``.``.
NAME_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,100}")
#: User logins, including GitHub Apps' bot users such as ``dependabot[bot]``.
LOGIN_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,100}(\[bot\])?")
#: ``owner/name`` of a repository.
FULL_NAME_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,100}/[A-Za-z0-9._-]{1,100}")
#: Clone URLs: http(s) as GitHub sends them, or ``file://`` for on-premise mirrors and tests;
#: never ``ext::``, ``ssh`` or a ``-option``, so a crafted URL cannot make git run a command.
CLONE_URL_PATTERN = re.compile(r"(https?|file)://[^\s]{1,2000}")
#: Branch names: no whitespace, not starting with ``-``.
REF_PATTERN = re.compile(r"[^\s-][^\s]{0,254}")
#: A time as GitHub writes it in webhook payloads (``created_at``, ``updated_at``): ISO 8601,
#: UTC, whole seconds, e.g. ``2026-11-30T10:02:00Z``.
TIME_PATTERN = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")


class PayloadError(ValueError):
    """A field the handler needs is missing, has the wrong type, or is malformed."""


def field(data: Any, path: str) -> Any:
    """Return the value at dotted ``path`` (e.g. ``"pull_request.head.sha"``) in ``data``.

    Raises:
        PayloadError: a step of the path is missing or is not a JSON object.
    """
    node = data
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            raise PayloadError(f"payload field {path} is missing")
        node = node[key]
    return node


def get_obj(data: Any, path: str) -> dict[str, Any]:
    """Return the JSON object at ``path``.

    Raises:
        PayloadError: missing or not an object.
    """
    value = field(data, path)
    if not isinstance(value, dict):
        raise PayloadError(f"payload field {path} must be an object")
    return value


def get_str(data: Any, path: str, pattern: re.Pattern[str] | None = None) -> str:
    """Return the string at ``path``, checked against ``pattern`` (a full match) if given.

    Raises:
        PayloadError: missing, not a string, or not matching ``pattern``.
    """
    value = field(data, path)
    if not isinstance(value, str):
        raise PayloadError(f"payload field {path} must be a string")
    if pattern is not None and not pattern.fullmatch(value):
        raise PayloadError(f"payload field {path} is malformed")
    return value


def get_time(data: Any, path: str) -> str:
    """Return the GitHub time at ``path`` (`TIME_PATTERN`), or "" when absent or malformed.

    Never raises: a handler that needs the time passes "" on and the worker fails closed.
    """
    try:
        value = field(data, path)
    except PayloadError:
        return ""
    return value if isinstance(value, str) and TIME_PATTERN.fullmatch(value) else ""


def get_id(data: Any, path: str) -> int:
    """Return the positive integer at ``path`` (ids and PR numbers; booleans are refused).

    Raises:
        PayloadError: missing, not an integer, or not positive.
    """
    value = field(data, path)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PayloadError(f"payload field {path} must be a positive integer")
    return value


#: Why a delivery without ``installation.id`` is ignored (see `installation_id`).
NO_INSTALLATION = "payload has no installation.id, so the App cannot authenticate"


def installation_id(data: Any) -> int | None:
    """Return ``installation.id``, or ``None`` when the payload has no installation.

    Without it the worker cannot authenticate as the App, so the handler ignores the delivery.

    Raises:
        PayloadError: ``installation.id`` is present but not a positive integer.
    """
    installation = data.get("installation") if isinstance(data, dict) else None
    if not isinstance(installation, dict) or installation.get("id") is None:
        return None
    return get_id(data, "installation.id")


def installed(data: Any, decision: Decision) -> int | None:
    """Return ``installation.id`` (`installation_id`); without one, mark the delivery ignored
    (`NO_INSTALLATION`) and return None, so the handler returns at once.

    Raises:
        PayloadError: ``installation.id`` is present but not a positive integer.
    """
    install_id = installation_id(data)
    if install_id is None:
        decision.ignore(NO_INSTALLATION)
    return install_id


def repo_ref(data: Any) -> RepoRef:
    """Return the ``repository`` of a payload as a ``RepoRef`` (owner login, name, clone URL).

    Raises:
        PayloadError: a field is missing or malformed.
    """
    return RepoRef(
        owner=get_str(data, "repository.owner.login", NAME_PATTERN),
        name=get_str(data, "repository.name", NAME_PATTERN),
        clone_url=get_str(data, "repository.clone_url", CLONE_URL_PATTERN),
    )
