"""litellm stays out of the web process, is imported lazily, and never fetches its prices."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "GITHUB_WEBHOOK_SECRET": "x",
           "REDIS_URL": "redis://127.0.0.1:1/0"}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=180)


def test_the_web_process_and_the_engine_do_not_import_litellm() -> None:
    result = run_python(
        "import sys\nimport app.main\n"
        "import worker.main, worker.pipeline.trees, worker.evals.run.runner\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('litellm', 'openai')))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_litellm_uses_its_bundled_price_table_without_network() -> None:
    result = run_python(
        "import os\nfrom worker.evals.llm import client as llm\nm = llm.litellm_module()\n"
        "print(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'])\n"
        "print(m.model_cost['gpt-4o-mini']['input_cost_per_token'] > 0)\n"
        "print(m.callbacks, m.success_callback, m.failure_callback)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:3] == ["True", "True", "[] [] []"]
    assert "fetch" not in result.stderr.lower()  # a fetch attempt would warn, then fall back
