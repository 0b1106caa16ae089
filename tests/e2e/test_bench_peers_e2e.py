"""``python -m bench.peers`` runs end to end with llmgate alone, against the recorded peer
figures: real redis-server, the fake provider as a process, llmgate as whole processes.

Five tickets and one repetition keep it short; the point is that the side-by-side bench the
issue's closing note quotes still works and says where the peers' figures come from, not its
figures.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]


def test_llmgate_against_recorded_peers_prints_the_table_and_the_headline() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.peers", "--repeat", "1", "--examples",
                           "5", "--without-peers"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for peer in ("llmci", "promptfoo"):
        assert f"- {peer}: not run (--without-peers); compared with its figures recorded on" in out
    assert re.search(r"^\| one side, cold, wall \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ / [0-9.]+ / "
                     r"[0-9.]+ \|$", out, re.MULTILINE), out
    assert re.search(r"^\| llmgate \| [0-9.]+ \|", out, re.MULTILINE), out
    assert "| llmci (r) |" in out and "| promptfoo (r) |" in out
    assert re.search(r"llmgate --version [0-9.]+ s, --help [0-9.]+ s", out)
    assert re.fullmatch(r"peers_cold_wall_vs_promptfoo=\d+\.\d{3}", out.splitlines()[-1]), out
