"""``ping``: GitHub sends it when the webhook is created; answer so the setup shows green."""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

from app.routes.decision import Decision

router = Router()


@router.register("ping")
async def pong(event: Event, decision: Decision) -> None:
    """Answer ``{"status": "pong"}`` and enqueue nothing."""
    decision.answer("pong")
