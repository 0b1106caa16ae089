"""arq job: answer one shard of a gate's examples (worker/gate/shards.py); wiring only."""

from __future__ import annotations

from typing import Any

from worker.contract import ShardPayload
from worker.gate import Services, shards


async def answer_shard(ctx: dict[str, Any], payload: ShardPayload) -> dict[str, str]:
    """Answer the shard ``payload`` names and write its result once; never writes to GitHub.

    Returns:
        ``{"status": ...}`` as `worker.gate.shards.answer_shard`, stored by arq.

    Raises:
        GitHubError, redis.exceptions.RedisError, GitError: transient (arq tries again).
    """
    services: Services = ctx["services"]
    return await shards.answer_shard(services, payload)
