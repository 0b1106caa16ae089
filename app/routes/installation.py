"""``installation`` and ``installation_repositories``: the App gains or loses repositories.

Every App receives these without subscribing. ``installation`` ``deleted``/``suspend``/
``created``/``unsuspend`` and ``installation_repositories`` ``added``/``removed`` queue
``installation_changed``, which records in Redis what is gone, so queued and running jobs of a
removed installation or repository end quietly (`worker.gate.installs`). Other actions change no
access and are ignored.
"""

from __future__ import annotations

from typing import Any

from gidgethub.routing import Router
from gidgethub.sansio import Event

from app.routes.decision import Decision
from app.routes.payload import FULL_NAME_PATTERN, PayloadError, get_str
from worker.contract import JOB_INSTALLATION, InstallationPayload, event_job_id

router = Router()
#: The actions that change which repositories the App can reach.
INSTALLATION_ACTIONS = frozenset({"created", "deleted", "suspend", "unsuspend"})


def full_names(data: Any, key: str) -> list[str]:
    """Return the ``full_name`` of every repository listed under ``key`` (absent: none).

    Raises:
        PayloadError: a listed repository has no well-formed ``full_name``.
    """
    listed = data.get(key) or []
    if not isinstance(listed, list):
        raise PayloadError(f"payload field {key} must be a list")
    return [get_str(repo, "full_name", FULL_NAME_PATTERN) for repo in listed]


def _plan(event: Event, decision: Decision, added: list[str], removed: list[str]) -> None:
    data = event.data
    installation = data.get("installation")
    install_id = installation.get("id") if isinstance(installation, dict) else None
    if not isinstance(install_id, int) or isinstance(install_id, bool) or install_id <= 0:
        decision.ignore("payload has no installation.id")
        return
    payload = InstallationPayload(delivery_id=event.delivery_id, installation_id=install_id,
                                  event=event.event, action=str(data.get("action", "")),
                                  repos_added=added, repos_removed=removed)
    decision.enqueue(JOB_INSTALLATION, payload,
                     event_job_id("installation", None, f"{install_id}:{event.delivery_id}"))


@router.register("installation")
async def installation_changed(event: Event, decision: Decision) -> None:
    """Plan recording an installation deleted, suspended, created or unsuspended."""
    if event.data.get("action") not in INSTALLATION_ACTIONS:
        decision.ignore("installation action changes no access")
        return
    _plan(event, decision, [], [])  # the whole installation: one record covers every repository


@router.register("installation_repositories")
async def repositories_changed(event: Event, decision: Decision) -> None:
    """Plan recording repositories added to or removed from an installation.

    Raises:
        PayloadError: a listed repository is malformed (the receiver answers 400).
    """
    data = event.data
    if data.get("action") not in ("added", "removed"):
        decision.ignore("installation_repositories action changes no access")
        return
    _plan(event, decision, full_names(data, "repositories_added"),
          full_names(data, "repositories_removed"))
