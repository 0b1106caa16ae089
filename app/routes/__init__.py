"""Event routing: one module per event family, each with its own gidgethub ``Router``.

Handlers have the signature ``async def handler(event, decision) -> None``: they read the
payload, decide, and record the decision (``app.routes.decision.Decision``); they do no I/O.

Face (``__all__``): the router and the decision's types; the package imports every handler
module anyway to build the router, so its face is eager (tests/test_faces.py).
"""

from __future__ import annotations

from gidgethub.routing import Router

from app.routes import (
    approval,
    checks,
    installation,
    issue_comment,
    merge_group,
    ping,
    pull_request,
    push,
)
from app.routes.decision import Decision, PlannedJob
from app.routes.payload import PayloadError

__all__ = ["Decision", "PayloadError", "PlannedJob", "router"]

#: All handlers of the web process, combined.
router = Router(pull_request.router, issue_comment.router, ping.router, approval.router,
                push.router, checks.router, merge_group.router, installation.router)
