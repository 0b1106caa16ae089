"""``llmgate run --no-cache / --refresh-cache`` with a real Redis and the fake provider."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import KEY_ENV, model_config, write_repo
from worker.cli.main import main
from worker.evals.llm.cache import KEY_PREFIX
from worker.evals.llm.cli_cache import cache_mode, cache_url

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm


def test_flags_and_url() -> None:
    assert cache_mode(argparse.Namespace(no_cache=False, refresh_cache=False)) == "use"
    assert cache_mode(argparse.Namespace(no_cache=True, refresh_cache=False)) == "off"
    assert cache_mode(argparse.Namespace(no_cache=False, refresh_cache=True)) == "refresh"
    assert cache_url({"REDIS_URL": "redis://h:1/0"}) == "redis://h:1/0"
    assert cache_url({}) is None
    with pytest.raises(SystemExit):
        main(["run", "--no-cache", "--refresh-cache"])


def test_the_run_command_reads_and_writes_the_cache(
        llm: FakeLLMServer, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    repo = write_repo(tmp_path, model_config(llm.url, gate="{pass_rate: {min: 0.5}}",
                                             assertions="      - {type: contains, value: echo}\n"),
                      [{"id": "a", "input": "hi"}, {"id": "b", "input": "ho"}])
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    monkeypatch.setenv("REDIS_URL", redis_url)
    client = redis.Redis.from_url(redis_url)
    try:
        assert main(["run", "--repo", str(repo), "--no-cache"]) == 0
        assert len(llm.calls()) == 2 and client.keys(KEY_PREFIX + "*") == []
        assert main(["run", "--repo", str(repo)]) == 0
        assert len(llm.calls()) == 4 and len(client.keys(KEY_PREFIX + "*")) == 2
        assert main(["run", "--repo", str(repo)]) == 0
        assert len(llm.calls()) == 4  # answered from the cache
        assert main(["run", "--repo", str(repo), "--refresh-cache"]) == 0
        assert len(llm.calls()) == 6
    finally:
        client.close()
    err = capsys.readouterr().err
    assert "llmgate: estimate in the working tree: 2 provider calls (0 cached)" in err
    assert "0 provider calls (2 cached)" in err


@pytest.mark.slow
def test_max_duration_counts_the_run_not_the_import_of_litellm(llm: FakeLLMServer,
                                                                tmp_path: Path) -> None:
    """Field case: in a fresh process, litellm's import (seconds) used up a 1 s max_duration,
    so no call was sent. Run as a process, so litellm is imported afresh."""
    llm.setup({"default_reply": "echo"})
    config = model_config(llm.url, settings="max_duration: 1",
                          gate="{pass_rate: {min: 0.5}}",
                          assertions="      - {type: contains, value: echo}\n")
    repo = write_repo(tmp_path / "repo", config, [{"id": "a", "input": "hi"},
                                                  {"id": "b", "input": "ho"}])
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "worker.cli", "run", "--no-cache", "--format", "json",
         "--output", str(report)], cwd=repo, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).parents[3]),
             "HOME": str(tmp_path), KEY_ENV: "sk-fake-test-key"})
    assert done.returncode == 0, done.stderr
    stored = json.loads(report.read_text())
    assert stored["conclusion"] == "success"
    assert len(llm.calls()) == 2
