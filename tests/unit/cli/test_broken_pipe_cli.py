"""A report piped into a reader that leaves early (``llmgate run | head -1``) ends without a
traceback and keeps the verdict's exit code (a new user's finding: a BrokenPipeError traceback
and exit 1, the gate-failed code, in 4 runs of 5)."""

from __future__ import annotations

import subprocess
import sys

WRITE = ("import sys; from worker.cli.formats import _write; "
         "_write('line\\n' * 200000, None); sys.exit(4)")


def test_a_reader_that_leaves_early_costs_no_traceback_and_no_exit_code() -> None:
    for _ in range(3):
        writer = subprocess.Popen([sys.executable, "-c", WRITE], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        assert writer.stdout is not None and writer.stderr is not None
        reader = subprocess.run(["head", "-1"], stdin=writer.stdout, capture_output=True,
                                check=True)
        writer.stdout.close()
        err = writer.stderr.read().decode()
        assert (writer.wait(timeout=60), reader.stdout, err) == (4, b"line\n", "")
