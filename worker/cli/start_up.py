"""When ``llmgate run`` imports litellm in the background: only when the run will need it.

litellm's import (and its price table) costs about 1.5 s of CPU. A cold run needs it for its
first model call, so it starts in a background thread at once and overlaps git's checkouts and
the configs' parsing (issue 20). A re-run of the same commits is answered from the response
cache and never calls litellm: there the import only competed for the interpreter with the run
(measured on the 200-ticket job of bench/peers: warm re-runs of 3.5-4.0 s with the import
against 2.15-2.25 s without).

So each finished run leaves a marker in the response cache (same store, same expiry as its
answers) under a key of what it ran (`run_fingerprint`: the repository, head and base as
resolved, the config, the flags that change answers, and for a working tree a digest of its
uncommitted changes). A run whose marker is there skips the early import; if it does need
litellm after all (an answer expired, a model call the marker did not foresee, an endpoint
without ``api_key_env``, whose key variable litellm names and is checked before the cache
answers its calls, or a model priced from litellm's table under ``max_cost_usd``), the first
call imports it then, as `worker.evals.llm.client.litellm_module` always does. A wrong guess only
moves the import, never changes an answer. ``--verbose`` says which way it went.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import threading
from pathlib import Path

from worker.evals.context import EvalContext
from worker.evals.llm.cache import KEY_PREFIX, ResponseCache
from worker.evals.llm.disk_cache import context_cache

log = logging.getLogger("llmgate.cli")

#: Key prefix of the markers: beside the answers (``llmgate:cache:v1:``), never among them.
MARKER_PREFIX = "llmgate:run-marker:v1:"
#: The flags of ``llmgate run`` whose values change the calls a run makes.
_FLAGS = ("head", "base", "base_tip", "config", "compare_to", "calibration", "concurrency",
          "repeats", "model", "max_cost_usd")


async def run_fingerprint(repo: Path, args: argparse.Namespace) -> dict[str, str]:
    """Return what identifies this run for its marker (module docstring).

    Keys: ``repo`` (resolved path), ``commit`` (``HEAD``'s sha, "" outside a commit), ``tree``
    (sha-256 of ``git diff HEAD`` and the untracked files' names: "" when clean) and each flag
    of `_FLAGS` as given. Git errors leave the field empty; nothing is raised.
    """
    from worker.checkout import local_git

    found = {"repo": str(repo.resolve())}
    for flag in _FLAGS:
        found[flag] = str(getattr(args, flag, None))
    code, out, _ = await local_git(repo, "rev-parse", "--verify", "--quiet", "HEAD")
    found["commit"] = out.strip() if code == 0 else ""
    if getattr(args, "head", None):  # a commit: the working tree plays no part
        found["tree"] = ""
        return found
    _, diff, _ = await local_git(repo, "diff", "HEAD", "--no-ext-diff", "--binary")
    _, untracked, _ = await local_git(repo, "ls-files", "--others", "--exclude-standard", "-z")
    changes = diff + "\0" + untracked
    found["tree"] = hashlib.sha256(changes.encode("utf-8", "surrogateescape")).hexdigest() \
        if changes != "\0" else ""
    return found


async def answered_before(evals: EvalContext, fingerprint: dict[str, str]) -> bool:
    """Return whether a run with this fingerprint finished before and its answers are still in
    the response cache (False with ``--no-cache`` or ``--refresh-cache``, or a cache error)."""
    cache = context_cache(evals, evals.cache_mode)
    return await cache.get(_marker(cache, fingerprint)) is not None


async def remember(evals: EvalContext, fingerprint: dict[str, str]) -> None:
    """Leave this run's marker in the response cache (modes ``use`` and ``refresh``); a
    cache error is logged by the cache, not raised."""
    cache = context_cache(evals, evals.cache_mode)
    await cache.put(_marker(cache, fingerprint), {"finished": True})


def _marker(cache: ResponseCache, fingerprint: dict[str, str]) -> str:
    return MARKER_PREFIX + cache.key("run", fingerprint)[len(KEY_PREFIX):]


def import_in_background(*, warm: bool) -> None:
    """Start importing litellm in a background thread unless ``warm`` (module docstring).

    The thread is not a daemon: the interpreter joins it before it finalizes. A daemon thread
    still importing litellm's compiled dependencies when the run ended (Ctrl-C a second in)
    made a pyo3 module panic during finalization ("The Python interpreter is not
    initialized"), printed after "llmgate: interrupted". The cost is at most the rest of the
    import.
    """
    if warm:
        log.info("litellm not imported up front: this run finished before and its answers "
                 "are in the response cache")
        return
    from worker.evals.llm.client import litellm_module

    log.info("importing litellm in the background (overlaps checkout and parsing)")
    threading.Thread(target=litellm_module, name="llmgate-import", daemon=False).start()
