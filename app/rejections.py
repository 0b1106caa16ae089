"""Log refused deliveries cheaply: anyone can send them, so a flood must not flood the log.

The first rejection after a quiet spell is logged at once, in full (one line: status and the
short reason, never the payload or a header value). Rejections in the next `WINDOW_S` seconds
are only counted, per status code; the first rejection after the window writes one summary
line (counts per status and the last reason of each) and opens a new window. A steady flood
thus costs two short lines per window whatever its rate, and the state is one counter per
distinct status code (a handful), so memory does not grow.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

#: Length of one counting window, seconds.
WINDOW_S = 10.0
#: Longest reason kept and logged, characters (reasons are ours, but may quote a delivery id).
MAX_REASON_CHARS = 120


class RejectionLog:
    """Aggregates rejection log lines (see the module doc); not thread-safe (one event loop)."""

    def __init__(self, logger: logging.Logger, window_s: float = WINDOW_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """Write to ``logger``; ``clock`` returns seconds (monotonic), injectable for tests."""
        self._log = logger
        self._window_s = window_s
        self._clock = clock
        self._window_end = float("-inf")
        self._counts: dict[int, int] = {}
        self._reasons: dict[int, str] = {}

    def record(self, status_code: int, reason: str) -> None:
        """Count one refused delivery; log it now or in the next summary."""
        reason = reason[:MAX_REASON_CHARS]
        now = self._clock()
        if now < self._window_end:
            self._counts[status_code] = self._counts.get(status_code, 0) + 1
            self._reasons[status_code] = reason
            return
        self.flush()
        self._window_end = now + self._window_s
        self._log.warning("webhook rejected (%d): %s", status_code, reason)

    def flush(self) -> None:
        """Write the summary of the rejections counted so far, if any, and reset the counts."""
        if not self._counts:
            return
        total = sum(self._counts.values())
        parts = ", ".join(f"{code} x{count} ({self._reasons[code]})"
                          for code, count in sorted(self._counts.items()))
        self._log.warning("webhook rejected %d more deliveries within %.0f s: %s", total,
                          self._window_s, parts)
        self._counts.clear()
        self._reasons.clear()
