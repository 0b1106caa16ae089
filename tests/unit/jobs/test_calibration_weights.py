"""The last calibration's A/A runs weigh the examples of the App's gate (and ``llmgate run``'s).

Real Redis, real git, a burst arq worker and the schema-checking fake GitHub. The suite has 16
examples that passed in each of 5 earlier identical runs and 6 that passed in 3 of them. Head
breaks 8 of the stable ones and fixes 4 flaky ones base fails. Unweighted (no calibration
known) that is McNemar's 8 against 4, p = 794/4096 = 0.194: the check passes. With the record
in Redis a break of an example that never flipped counts about 3.5 times a flaky one's fix
(worker/evals/verdict/flakiness.py), the exact sign-flip p-value is 24/4096 = 0.0059 and the
check fails.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.fakes.fake_github import FakeGitHubServer
from tests.unit.cli.test_cli_merge_base import TARGET
from tests.unit.runs_support import PRIVATE_PEM, fake_github_server
from tests.unit.worker_support import APP_ID, OWNER, REPO, commit, gate_payload, git, run_jobs
from worker.cli.main import main as llmgate
from worker.gate.calibration import result_key

KEY = f"{OWNER}/{REPO}"
STABLE = [f"s{n}" for n in range(1, 17)]
FLAKY = [f"f{n}" for n in range(1, 7)]
#: Echoes its input, but answers "nope" to the inputs in BROKEN.
BOT = TARGET
CONFIG = """version: 1
settings:
  concurrency: 8
suites:
  - name: tickets
    dataset: evals/t.jsonl
    target:
      command: python3 bot.py {input_file} {output_file}
    assertions:
      - type: equals
    gate:
      pass_rate:
        regression: {alpha: 0.05}
"""
DATASET = "".join(json.dumps({"id": i, "input": i, "expected": i}) + "\n"
                  for i in STABLE + FLAKY)
RECORD = {"runs": 5, "comparisons": 4, "false_alarms": 0, "false_alarm_rate": 0.0,
          "alpha": 0.05, "sha": "0" * 40, "finished_at": 1718078400.0,
          "unstable": {"tickets": FLAKY},
          "history": {"tickets": {i: [1.0] * 5 for i in STABLE} | {
              i: [1.0, 0.0, 1.0, 0.0, 1.0] for i in FLAKY}}}


def flaky_repo(dest: Path) -> dict[str, str]:
    """main fails f1-f4; pr/mixed fails s1-s8 and passes every flaky example; pr/again is
    pr/mixed and a README (another head, so the two checks do not share one)."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    shas = {"main": commit(dest, "main", {".llmgate.yml": CONFIG, "evals/t.jsonl": DATASET,
                                          "bot.py": BOT.format(broken=FLAKY[:4])})}
    shas["pr/mixed"] = commit(dest, "pr/mixed", {"bot.py": BOT.format(broken=STABLE[:8])})
    shas["pr/again"] = commit(dest, "pr/again", {"README.md": "again\n"}, start="pr/mixed")
    return shas


@pytest.fixture()
def github() -> Iterator[FakeGitHubServer]:
    with fake_github_server() as server:
        yield server


@pytest.mark.slow
async def test_the_calibration_in_redis_weighs_the_apps_gate(
        github: FakeGitHubServer, redis_url: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    shas = flaky_repo(tmp_path / "flaky")
    env = {"GITHUB_APP_ID": APP_ID, "GITHUB_APP_PRIVATE_KEY": PRIVATE_PEM,
           "REDIS_URL": redis_url, "LLMGATE_WORKDIR": str(tmp_path / "work"),
           "GITHUB_API_URL": github.url}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    url = str(tmp_path / "flaky")
    await run_jobs([gate_payload(url, shas["pr/mixed"], shas["main"], number=1)])
    client = Redis.from_url(redis_url)
    await client.set(result_key(KEY), json.dumps(RECORD))
    await client.aclose()
    await run_jobs([gate_payload(url, shas["pr/again"], shas["main"], number=2)])
    state = github.state()
    assert state["violations"] == []
    conclusions = [run["conclusion"] for run in state["check_runs"]]
    assert conclusions == ["success", "failure"]


def test_llmgate_run_takes_the_calibration_file(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    shas = flaky_repo(tmp_path / "flaky")
    repo = tmp_path / "flaky"
    git(repo, "switch", "-q", "pr/mixed")
    record = tmp_path / "cal.json"
    record.write_text(json.dumps(RECORD))
    args = ["run", "--repo", str(repo), "--base", shas["main"], "--no-cache", "--format",
            "json"]
    assert llmgate(args) == 0
    capsys.readouterr()
    assert llmgate([*args, "--calibration", str(record)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert "regression" in json.dumps(report)
    record.write_text("[1, 2]")
    assert llmgate([*args, "--calibration", str(record)]) == 3
