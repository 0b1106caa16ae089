"""One factor for every time limit of the test suite (issue 34).

A test that waits for something (a process to start, a gate to conclude, a port to listen)
waits at most a number of seconds written for an idle 2-core machine; `scaled` multiplies it by
``LLMGATE_TEST_TIME_SCALE`` (default 1, any number >= 1), and the session's pytest-timeout limit
is multiplied too (tests/conftest.py). On a loaded or slow machine set one variable, e.g.
``LLMGATE_TEST_TIME_SCALE=3 pytest``, instead of editing limits test by test. Limits that are a
product's promise rather than a wait (e.g. "a burst's heads concluded within 30 s") are scaled
as well: the promise is measured by the benches (bench/), the tests check that nothing is lost.
"""

from __future__ import annotations

import os

#: The environment variable holding the factor.
SCALE_ENV = "LLMGATE_TEST_TIME_SCALE"


def time_scale() -> float:
    """Return the factor: ``LLMGATE_TEST_TIME_SCALE`` as a number >= 1, else 1.

    Raises:
        ValueError: the variable is set but is not a number >= 1 (a typo must not pass).
    """
    raw = os.environ.get(SCALE_ENV, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{SCALE_ENV}={raw!r} is not a number") from None
    if not value >= 1.0:  # also refuses NaN
        raise ValueError(f"{SCALE_ENV}={raw!r}: the factor must be a number >= 1")
    return value


def scaled(seconds: float) -> float:
    """Return ``seconds`` (a limit for an idle 2-core machine) times `time_scale`, seconds."""
    return seconds * time_scale()
