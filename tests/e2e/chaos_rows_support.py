"""What the test files of issue 14's table share (tests/e2e/test_chaos*_e2e.py).

The module's fake GitHub and fake provider (`fakes`, one pair per test file), the settle every
row waits, the worker setting of the rows that queue gates, and how a row prints and checks its
tally (tests/e2e/chaos_tally.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.chaos_support import ChaosFakes, ChaosStack
from tests.e2e.chaos_tally import Tally

#: Seconds after the fault (or the last delivery) by which the system must have converged:
#: three sweeper periods (tests/e2e/chaos_support.CHAOS_WORKER_ENV), and the reconciler's.
SETTLE_S = 15.0
#: Seconds by which gates a wiped Redis lost are re-queued by the reconciler (a pass every 5 s,
#: each decision confirmed a third of the lease later) and concluded: "after the reconciler's
#: period", as issue 14 states.
RECONCILE_SETTLE_S = 90.0
#: One job per worker, so that gates wait in the queue while others run.
ONE_JOB = {"LLMGATE_MAX_JOBS": "1"}


def fails_today(reason: str) -> pytest.MarkDecorator:
    """Mark a row that fails today: strict (the fix must remove the mark) and only on a failed
    assertion (a harness error, such as a wait timing out, still fails the test)."""
    return pytest.mark.xfail(strict=True, raises=AssertionError, reason=f"issue 14: {reason}")


@pytest.fixture(scope="module", name="fakes")
def chaos_fakes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosFakes]:
    """The fixture ``fakes``: the fake GitHub and the fake provider, shared by the module's
    stacks (a test file imports `chaos_fakes` to have it)."""
    with ChaosFakes(tmp_path_factory.mktemp("chaos-fakes")) as started:
        yield started


def in_progress(stack: ChaosStack) -> int:
    """``llmgate`` check runs not completed now."""
    return sum(r["status"] != "completed" for r in stack.github.state()["check_runs"])


def report(name: str, stack: ChaosStack, counted: Tally, *log_needles: str) -> None:
    """Print the tally, the workers' exit codes and the log lines that show the cause."""
    print(f"\n[{name}] {counted.line()}\n[{name}] worker exits: {stack.worker_exits()}")
    for line in stack.log_lines(*log_needles)[:12]:
        print(f"[{name}]   {line}")


def assert_no_loss(counted: Tally) -> None:
    """Assert nothing lost, duplicated or stuck and no request GitHub would refuse."""
    assert (counted.lost, counted.duplicated_checks, counted.duplicated_comments,
            counted.stuck) == ([], {}, {}, []), counted.line()
    assert counted.violations == [], counted.line()


CAUSES = ("Traceback", "ConnectionError", "expired", "transient", "OOM", "secondary",
          "Error", "exited")
