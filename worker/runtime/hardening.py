"""What a worker process does for security at start-up, in one place.

1. Checks the security settings (`check_settings`), so a typo stops the worker at once:
   ``LLMGATE_SANDBOX*``/``LLMGATE_TARGET_*`` (`worker.security.sandbox`) and
   ``LLMGATE_ENCRYPTION_KEYS`` (`worker.security.secretbox`).
2. `harden` then: makes the process non-dumpable (``/proc/<pid>/environ`` and ``mem`` closed
   to other processes; see `worker.security.sandbox.harden_worker`), checks the target sandbox,
   builds the `Redactor` from the environment and the App's key and routes every log record through
   it, and says in one log line how targets are confined, with a warning when the App's key file
   would be readable by them.
3. Ends the target processes a dead worker left (its own earlier life, or a sibling's) and
   records this worker's from now on (`worker.security.sandbox_procs.take_over`), and removes
   the scratch folders (``llmgate-target-*``, ``llmgate-view-*``) dead processes left in the
   temporary directory (`worker.security.scratch.remove_stale`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from worker.runtime.settings import SettingsError, WorkerConfig
from worker.security import (
    Redactor,
    Sandbox,
    SandboxError,
    SecretBox,
    SecretBoxError,
    install_log_redaction,
    sandbox,
    sandbox_procs,
    scratch,
    secrets_from_environ,
)

log = logging.getLogger("llmgate.worker")


def check_settings(environ: Mapping[str, str]) -> Sandbox:
    """Validate the security settings and return the target sandbox they describe.

    Raises:
        SettingsError: one line naming the malformed variable (never its value), or a Redis on
            a unix socket without a password (`check_redis_socket`).
    """
    for name in REDIS_URL_VARIABLES:
        check_redis_socket(name, environ.get(name, ""))
    try:
        SecretBox.from_env(environ)
        return Sandbox.from_env(environ)
    except (SandboxError, SecretBoxError) as err:
        raise SettingsError(str(err)) from None


#: The worker's Redis URLs (the queue's, and the cache's when it is apart).
REDIS_URL_VARIABLES = ("REDIS_URL", "LLMGATE_CACHE_REDIS_URL")


def check_redis_socket(name: str, url: str) -> None:
    """Refuse a Redis on a unix socket that takes connections without a password.

    The sandbox keeps target commands off Redis's TCP port (Landlock ABI 4), but Landlock does
    not govern ``connect()`` on a socket file, and a target runs as the worker's user: a pull
    request's code could write the queue (jobs the worker runs), the cache and the baselines.
    With ``requirepass`` the socket is useless to it: the password is only in the worker's
    environment, which targets never see (worker/security/process.py).

    Raises:
        SettingsError: ``url`` is ``unix://`` without a password (``unix://:PASSWORD@/path``
            or ``?password=``).
    """
    parts = urlsplit(url)
    if parts.scheme != "unix" or parts.password or "password=" in parts.query:
        return
    raise SettingsError(
        f"{name} is a unix socket without a password: target commands could connect to it (the "
        "sandbox cannot stop a connect() to a socket file); set requirepass and give it in the "
        "URL (unix://:PASSWORD@/path/redis.sock), or use a TCP Redis")


def harden(config: WorkerConfig, environ: Mapping[str, str] | None = None) -> Redactor:
    """Harden this worker process (see the module doc) and return its redactor.

    Raises:
        SettingsError: a security setting is malformed.
    """
    env = os.environ if environ is None else environ
    box = check_settings(env)
    if environ is None:
        box = sandbox.current()  # the very sandbox targets will get (it follows os.environ)
    redactor = Redactor([*secrets_from_environ(env), config.private_key])
    install_log_redaction(redactor)
    undumpable = sandbox.harden_worker()
    log.info("%s; worker process %s", box.describe(),
             "is not dumpable" if undumpable else "could NOT be made non-dumpable")
    key_file = env.get("GITHUB_APP_PRIVATE_KEY_FILE")
    if key_file and box.abi >= 1 and box.readable_by_targets(Path(key_file)):
        log.warning("GITHUB_APP_PRIVATE_KEY_FILE lies under a directory targets may read; move "
                    "it elsewhere (e.g. /etc/llmgate/ or the service's home)")
    end_leftovers(config)
    return redactor


def end_leftovers(config: WorkerConfig) -> None:
    """End dead workers' leftover target processes; record this worker's; remove the scratch
    folders of dead processes (one log line each, when there was any).

    Raises:
        SettingsError: ``LLMGATE_WORKDIR`` is not writable.
    """
    try:
        done = sandbox_procs.take_over(config.workdir)
    except OSError as err:
        raise SettingsError(f"LLMGATE_WORKDIR cannot be written: {err.strerror}") from None
    if done.killed:
        log.warning("ended %d target process(es) left running by dead worker(s) %s",
                    len(done.killed), ", ".join(map(str, done.workers)))
    removed = scratch.remove_stale()  # after the kills: nothing of theirs writes there now
    if removed:
        log.info("removed %d scratch folder(s) that dead processes left in %s",
                 len(removed), removed[0].parent)
