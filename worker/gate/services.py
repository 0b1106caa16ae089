"""The clients every job of one worker process shares (made once in ``on_startup``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import httpx
from redis.asyncio import Redis

from worker.baselines import BaselineSettings
from worker.checkout import Checkouts
from worker.gate.calibration import CalibrationSchedule
from worker.gate.head_history import HeadHistory
from worker.gate.trust import ApprovalStore
from worker.github import (
    AppCredentials,
    GitHubClient,
    GitHubLimiter,
    InstallationTokenCache,
    RedisLimitStore,
)
from worker.report import ReportStore
from worker.runtime import ShardSettings, WorkerConfig
from worker.security import Redactor


@dataclass
class Services:
    """Clients shared by every job of one worker process (made once in ``on_startup``)."""

    config: WorkerConfig
    http: httpx.AsyncClient
    tokens: InstallationTokenCache
    checkouts: Checkouts
    redis: Redis
    redactor: Redactor = field(default_factory=Redactor)
    calibration: CalibrationSchedule | None = None  # scheduled calibration (gate/calibration.py)
    #: Rate-limit pauses and write pacing per installation, shared in Redis by every worker
    #: (`worker.github.ratelimit`); None: made from ``redis`` with the default limits.
    github_limiter: GitHubLimiter | None = None
    #: Full reports behind the check run's Details link (None: ``LLMGATE_PUBLIC_URL`` unset).
    reports: ReportStore | None = None
    #: Stored baselines' TTL and size cap (``LLMGATE_BASELINE_*``, read once at start-up).
    baselines: BaselineSettings = field(default_factory=BaselineSettings)
    #: examples per shard and shards outstanding per gate (``LLMGATE_SHARD_*``).
    shards: ShardSettings = field(default_factory=ShardSettings)
    #: The Redis of the response cache, the learned answer lengths and the reports, which may
    #: evict (``LLMGATE_CACHE_REDIS_URL``); None: ``redis``, the queue's.
    cache_redis: Redis | None = None
    #: The App's bot login once `bot_login` asked GitHub (one App per worker process).
    _bot_login: str | None = field(default=None, init=False, repr=False)
    _bot_login_lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        """Share the GitHub limits through this worker's Redis unless given; keep the cache
        on the queue's Redis unless another is given."""
        if self.cache_redis is None:
            self.cache_redis = self.redis
        if self.github_limiter is None:
            self.github_limiter = GitHubLimiter(RedisLimitStore(self.redis))

    @property
    def cache(self) -> Redis:
        """The Redis of the response cache and reports (`cache_redis`, else the queue's)."""
        return self.redis if self.cache_redis is None else self.cache_redis

    @property
    def approvals(self) -> ApprovalStore:
        """Writers' approvals of untrusted heads (`worker.gate.trust`), in this worker's Redis."""
        return ApprovalStore(self.redis)

    @property
    def heads(self) -> HeadHistory:
        """The heads each pull request had and since when (`worker.gate.head_history`), in
        this worker's Redis: what an approve comment binds to."""
        return HeadHistory(self.redis)

    async def bot_login(self, gh: GitHubClient) -> str:
        """Return the login this App comments as, ``<slug>[bot]`` (``GET /app``), asked once
        per worker process: the sticky comment is found by it (`worker.github.comments`).

        Raises:
            GitHubError: GitHub refused ``GET /app`` (nothing is cached then).
        """
        async with self._bot_login_lock:  # two jobs of one process ask GitHub once
            if self._bot_login is None:
                self._bot_login = (await gh.get_app()).bot_login
        return self._bot_login

    def github(self, installation_id: int) -> GitHubClient:
        """Return a client authenticated as the given installation."""
        creds = AppCredentials(self.config.app_id, self.config.private_key)
        return GitHubClient(self.http, self.config.api_url, creds, self.tokens, installation_id,
                            limiter=self.github_limiter)
