"""Named baselines: a commit of the default branch kept under a name (``release``, ``v2``).

``llmgate run --promote NAME`` runs (or reuses) the suites of a default-branch commit, stores
them as baselines (worker/baselines/store.py, the records the App's pull requests and pushes
use) and points the name at them; ``llmgate run --compare-to NAME`` gates against that commit
instead of a merge base, so a team can compare with "the last release". A pointer::

    llmgate:baseline-name:<repo>:<name>   {"sha", "branch", "keys", "promoted_at"}

``keys`` are the record keys of the promoted suites; they are kept without expiry while the
name points at them. Promoting the name again gives the records of the previous commit an
expiry of ``LLMGATE_BASELINE_TTL_S`` from then (a record also serving as a branch's latest push
then expires too; a gate simply runs that base again).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from worker.baselines.keys import BaselineKey
from worker.baselines.store import BaselineStore, record_key

NAME_PREFIX = "llmgate:baseline-name:"
#: A baseline name: letters, digits, ``.``, ``_`` and ``-``, 1 to 64 characters.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")

#: KEYS[1] the pointer; ARGV[1] the new pointer JSON, ARGV[2] the TTL (s) for the old records.
_PROMOTE = """
local old = redis.call('GET', KEYS[1])
local new = cjson.decode(ARGV[1])
local keep = {}
for _, key in ipairs(new.keys) do keep[key] = true; redis.call('PERSIST', key) end
if old then
  for _, key in ipairs(cjson.decode(old).keys) do
    if not keep[key] then redis.call('EXPIRE', key, tonumber(ARGV[2])) end
  end
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""


def check_name(name: str) -> str:
    """Return ``name`` when it is a valid baseline name (`NAME_PATTERN`).

    Raises:
        ValueError: a one-line reason naming the rule.
    """
    if not NAME_PATTERN.match(name):
        raise ValueError(f"baseline name {name[:80]!r} must be 1-64 letters, digits, '.', '_' "
                         "or '-', starting with a letter or digit (e.g. release, v2.1)")
    return name


def name_key(repo: str, name: str) -> str:
    """Return the Redis key of the pointer of baseline ``name`` of ``repo`` (``owner/name``)."""
    return f"{NAME_PREFIX}{repo}:{check_name(name)}"


async def promote(store: BaselineStore, repo: str, name: str, sha: str, branch: str,
                  stored: Sequence[tuple[str, BaselineKey]]) -> None:
    """Point ``name`` at ``sha``'s records and keep them without expiry (module docstring).

    Args:
        store: the baseline store.
        repo: the repository (``owner/name``) the name belongs to.
        name: the baseline name (`check_name`).
        sha: the promoted commit (40 or 64 hex).
        branch: the default branch it is on.
        stored: ``(namespace, key)`` of every promoted suite record (a config in a folder
            stores under its own namespace, worker/pipeline/plan.py `baseline_namespace`).
    """
    pointer = {"sha": sha, "branch": branch,
               "keys": [record_key(namespace, sha, key) for namespace, key in stored],
               "promoted_at": store.clock()}
    await store.redis.eval(  # type: ignore[misc]  # redis-py: Awaitable | value
        _PROMOTE, 1, name_key(repo, name), json.dumps(pointer), str(store.settings.ttl_s))


async def lookup(store: BaselineStore, repo: str, name: str) -> dict[str, Any] | None:
    """Return the pointer of baseline ``name`` (``sha``, ``branch``, ``keys``,
    ``promoted_at``), or None when no commit was promoted under that name."""
    raw = await store.redis.get(name_key(repo, name))
    pointer: dict[str, Any] | None = json.loads(raw) if raw is not None else None
    return pointer
