"""``llmgate healthcheck``: the container's health check, for whichever process the image runs.

One image runs the web process or a worker, chosen by its command, so one check serves both:

- a worker writes ``LLMGATE_HEARTBEAT_FILE`` from its event loop every 10 s
  (``worker.runtime.lifecycle``), so a file younger than ``HEARTBEAT_MAX_AGE_S`` means the worker's
  loop is alive; while the worker cannot reach Redis the file says for how long
  (``redis-outage-s=<seconds>``), and an outage longer than ``HEARTBEAT_MAX_AGE_S`` is
  unhealthy too (the worker waits for Redis and takes no job meanwhile); while Redis refuses
  the worker's writes (full: ``OOM`` under ``noeviction``) the file says why
  (``redis-refuses-writes=<why>``) and the check is unhealthy at once, with what to do: the
  worker stays up and takes no job until a write is accepted again;
- otherwise the process is the web one, and ``GET http://127.0.0.1:$PORT/healthz`` must answer
  200 within ``HTTP_TIMEOUT_S``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import Any

#: A worker's heartbeat older than this is unhealthy, seconds (three missed 10 s beats).
HEARTBEAT_MAX_AGE_S = 30.0
#: Bound on the web process's answer, seconds.
HTTP_TIMEOUT_S = 3.0


def check(environ: Mapping[str, str] = os.environ, now_s: float | None = None) -> tuple[bool, str]:
    """Return (healthy, one-line reason) for this container's process."""
    from worker.runtime import heartbeat_file  # arq: not for `llmgate --help`

    beat = heartbeat_file(environ)
    if beat is not None and beat.exists():
        age_s = (time.time() if now_s is None else now_s) - beat.stat().st_mtime
        if age_s <= HEARTBEAT_MAX_AGE_S:
            note = _note(beat.read_text(errors="replace"))
            lost_s = _seconds(note.get("redis-outage-s"))
            refused = note.get("redis-refuses-writes")
            if refused is not None:
                refused_s = _seconds(note.get("redis-refuses-writes-s")) or 0.0
                return False, (f"worker is up, but Redis refuses its writes ({refused}) for "
                               f"{refused_s:.0f} s: it takes no job until Redis accepts writes "
                               "again (free memory or raise maxmemory of REDIS_URL's Redis)")
            if lost_s is not None and lost_s > HEARTBEAT_MAX_AGE_S:
                return False, (f"worker cannot reach Redis for {lost_s:.0f} s (> "
                               f"{HEARTBEAT_MAX_AGE_S:.0f} s): it takes no job until Redis "
                               "answers")
            return True, f"worker heartbeat {age_s:.0f} s old"
        return False, f"worker heartbeat {age_s:.0f} s old (> {HEARTBEAT_MAX_AGE_S:.0f} s)"
    port = environ.get("PORT", "").strip() or "8000"
    url = f"http://127.0.0.1:{port}/healthz"
    import httpx  # only the web process's check needs it

    try:
        status = httpx.get(url, timeout=HTTP_TIMEOUT_S).status_code
    except httpx.HTTPError as exc:
        return False, f"{url}: {type(exc).__name__}"
    return status == 200, f"{url}: HTTP {status}"


def _note(text: str) -> dict[str, str]:
    """The ``key=value`` lines of a heartbeat file's text."""
    return dict(line.partition("=")[::2] for line in text.splitlines() if "=" in line)


def _seconds(value: str | None) -> float | None:
    """``value`` as seconds, or None when missing or not a number."""
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def main() -> int:
    """Print the verdict; exit 0 healthy, 1 unhealthy (Docker's HEALTHCHECK convention)."""
    healthy, reason = check()
    print(reason, file=sys.stdout if healthy else sys.stderr)
    return 0 if healthy else 1


def add_healthcheck_command(sub: Any) -> None:
    """Add ``llmgate healthcheck`` to the CLI's subparsers (``argparse`` ``_SubParsersAction``)."""
    check_cmd = sub.add_parser("healthcheck", help="exit 0 when this container's web process "
                               "or worker is healthy (Docker HEALTHCHECK)",
                               description=__doc__)
    check_cmd.set_defaults(func=lambda _args: main())
