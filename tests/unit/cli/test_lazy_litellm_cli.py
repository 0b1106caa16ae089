"""``llmgate run`` imports litellm only when a call goes through it (issue 34, goal 2).

Each run is a fresh interpreter (litellm may already be imported by this one), which runs the
real CLI and prints whether ``litellm`` and the ``openai`` SDK are in ``sys.modules`` at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import echo_repo, endpoint_yaml, model_config, write_repo
from worker.evals.llm.direct import DIRECT_ENV

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm

PROBE = """import json, sys
from worker.cli.main import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "imported": sorted(
    m for m in ("litellm", "openai") if m in sys.modules)}))
"""
COMMAND_CONFIG = """version: 1
suites:
  - name: echo
    dataset: evals/d.jsonl
    target:
      command: python3 t.py {input_file} {output_file}
    assertions:
      - {type: contains, value: hi}
    gate: {pass_rate: {min: 0.5}}
"""
TARGET = """import json, sys
example = json.load(open(sys.argv[1]))
json.dump({"output": example["input"]}, open(sys.argv[2], "w"))
"""


def run_cli(repo: Path, *flags: str, **env: str) -> dict[str, Any]:
    """Run ``llmgate run --repo REPO FLAGS`` in a fresh interpreter; return its probe line."""
    found = subprocess.run([sys.executable, "-c", PROBE, "run", "--repo", str(repo), *flags],
                           capture_output=True, text=True, timeout=300,
                           env={**os.environ, **env})
    assert found.returncode == 0, found.stderr
    result: dict[str, Any] = json.loads(found.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture()
def no_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    """Answers cached on disk (``LLMGATE_CACHE_DIR``, per test), as a user's run."""
    monkeypatch.delenv("REDIS_URL", raising=False)


@pytest.mark.usefixtures("no_redis")
def test_a_run_on_a_self_hosted_endpoint_never_imports_litellm(llm: FakeLLMServer,
                                                               tmp_path: Path) -> None:
    """``openai/test-model`` with ``api_base`` (the fake server): the direct path. The same
    runs through litellm (``LLMGATE_DIRECT_CLIENT=0``) do import it, so the probe can tell."""
    repo = echo_repo(llm, tmp_path / "repo")
    assert run_cli(repo) == {"code": 0, "imported": []}
    assert len(llm.calls()) == 2
    assert run_cli(repo, "--no-cache", **{DIRECT_ENV: "0"}) == {
        "code": 0, "imported": ["litellm", "openai"]}
    assert len(llm.calls()) == 4


@pytest.mark.usefixtures("no_redis")
def test_a_cached_rerun_through_litellm_does_not_import_it(llm: FakeLLMServer,
                                                          tmp_path: Path) -> None:
    """The endpoints name ``api_key_env``, so nothing but a call needs litellm: not the
    estimate either (it counts the tokens of the calls the cache does not answer only)."""
    llm.setup({"default_reply": "echo"})
    embedder = endpoint_yaml(llm.url, "openai/text-embedding-3-small", "type: similar, "
                             "value: echo, threshold: 0.1")  # litellm knows it: its tokenizer
    repo = write_repo(tmp_path / "repo", model_config(
        llm.url, gate="{pass_rate: {min: 0.5}}",
        assertions=f"      - {{type: contains, value: echo}}\n      - {embedder}\n"),
        [{"id": "a", "input": "hi"}, {"id": "b", "input": "ho"}])
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert run_cli(repo, **{DIRECT_ENV: "0"})["imported"] == ["litellm", "openai"]
    assert [c["path"] for c in llm.calls()].count("embeddings") == 2
    assert run_cli(repo, **{DIRECT_ENV: "0"}) == {"code": 0, "imported": []}
    assert len(llm.calls()) == 4  # the rerun was answered from the cache


@pytest.mark.usefixtures("no_redis")
def test_a_run_of_command_targets_never_imports_litellm(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo", COMMAND_CONFIG, [{"id": "a", "input": "hi"},
                                                          {"id": "b", "input": "hi there"}],
                      files={"t.py": TARGET})
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert run_cli(repo) == {"code": 0, "imported": []}
