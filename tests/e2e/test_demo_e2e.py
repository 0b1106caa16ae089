"""``llmgate demo`` (README's first set-up command) runs end to end and shows both verdicts.

It starts its own redis-server, fake GitHub, web process and worker, so this runs it as a user
does: the console entry point in a child process.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]


def test_the_demo_fails_the_regressing_push_and_passes_the_fix() -> None:
    """Field case (a new user): the fix's run ended ``cancelled``, "Superseded by a push of
    e80ab5d", because the demo never told its GitHub that the pull request's head had moved,
    and a worker asks GitHub which head is newest. The README promises the fix is gated."""
    llmgate = Path(sys.executable).parent / "llmgate"  # the console script pip installed
    done = subprocess.run([str(llmgate), "demo"], cwd=ROOT, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    verdicts = re.findall(r"^check run 'llmgate': (\w+) / (\w+)$", done.stdout, re.MULTILINE)
    assert verdicts == [("completed", "failure"), ("completed", "success")], done.stdout
    assert "Superseded" not in done.stdout
    assert "=== sticky PR comment (1 comment(s), edited in place)" in done.stdout
    comment = done.stdout.split("=== sticky PR comment", 1)[1]
    assert comment.splitlines()[2:4] == ["<!-- llmgate -->", "### ✅ llmgate: pass"], comment
