"""``bench/webhook_ack.py`` runs end to end: real redis-server and uvicorn, every delivery queued.

Small counts keep it to a few seconds; the point is that the benchmark the README quotes still
works (llmgate and the bare reference), not its figures.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]
BENCH = ROOT / "bench" / "webhook_ack.py"


def _run(*args: str) -> str:
    done = subprocess.run([sys.executable, str(BENCH), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize("mode, checked", [
    ((), "every delivery queued one arq job"),
    (("--bare",), "no jobs (bare app)"),
], ids=["llmgate", "bare"])
def test_closed_loop_round_reports_and_checks_every_delivery(
        mode: tuple[str, ...], checked: str) -> None:
    out = _run("--count", "60", "--warmup", "10", "--concurrency", "5", *mode)
    assert checked in out
    assert re.search(r"^deliveries_per_s=\d+$", out.splitlines()[-1])


def test_open_loop_sends_at_the_given_rate() -> None:
    out = _run("--count", "40", "--warmup", "5", "--rate", "200")
    assert "open loop at 200/s" in out
    rate = re.fullmatch(r"deliveries_per_s=(\d+)", out.splitlines()[-1])
    assert rate is not None and 100 <= int(rate.group(1)) <= 210  # never faster than sent


def test_probe_reports_the_work_unit_and_slow_units() -> None:
    out = _run("--probe", "0.2")
    match = re.fullmatch(r"machine probe: work unit (\d+) us; (\d+) units in 0.2 s; (\d+) ran "
                         r"more than 4x slower \(worst (\d+\.\d)x\)\n", out)
    assert match is not None, out
    unit_us, units, slow = (int(match.group(i)) for i in (1, 2, 3))
    assert unit_us > 0 and 20 <= units <= 100 and 0 <= slow <= units
