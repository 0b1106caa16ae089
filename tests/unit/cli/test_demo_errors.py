"""``llmgate demo`` explains a failed set-up in one line, never with a traceback.

Case from the field (fresh-clone tester): without git on PATH, the demo ended in a
``CalledProcessError`` traceback that dropped the reason ("No such file or directory: 'git'").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def test_the_demo_without_git_says_so_in_one_line(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    redis = shutil.which("redis-server")
    assert redis is not None
    (bin_dir / "redis-server").symlink_to(redis)
    env = {**os.environ, "PATH": str(bin_dir)}
    done = subprocess.run([sys.executable, "-m", "worker.cli", "demo"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "building the example repository failed (is git installed?)" in done.stderr
    assert "'git'" in done.stderr
