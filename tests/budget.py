"""One budget for the suite's property tests (hypothesis), smaller outside CI (issue 34).

CI (``.ci/run`` exports ``LLMGATE_CI=1``) keeps every test's full number of examples; a local
run draws a fifth of them, at least 25, so that the suite stays a tool one runs while working.
Tests that set ``max_examples`` pass their number through `examples`; the others take the
``llmgate`` hypothesis profile of tests/conftest.py (hypothesis's default 100, scaled alike).
"""

from __future__ import annotations

import os

#: The environment variable that marks a CI run ("1": the full budget).
CI_ENV = "LLMGATE_CI"
#: The fewest examples a property test draws outside CI.
LOCAL_FLOOR = 25


def examples(n: int) -> int:
    """Return the number of examples for a property test written for ``n`` in CI.

    Args:
        n: the test's full budget (its ``max_examples`` in CI), a positive count.

    Returns:
        ``n`` when ``LLMGATE_CI`` is ``"1"``, else ``max(25, n // 5)``.
    """
    if os.environ.get(CI_ENV) == "1":
        return n
    return max(LOCAL_FLOOR, n // 5)
