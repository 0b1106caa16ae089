"""Any text a target or a model produces is reportable (issue 31).

Field cases: a command target whose JSON output held ``"\\ud800"`` (a lone surrogate), or bytes
that are not UTF-8, crashed ``llmgate run --format json`` with a traceback and exit code 1; in
the App the gate failed while storing the baseline. Now each invalid sequence becomes U+FFFD and
the example carries a note, through ``llmgate run`` (as a process, every report format), the
fake provider behind the response cache, and the gate job in a real arq worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support, worker_support
from tests.unit.llm_support import KEY_ENV, model_config
from tests.unit.worker_support import commit, gate_payload, git, write_tickets_tree
from worker.baselines.store import KEY_PREFIX, decode
from worker.cli.main import EXIT_PASS, main

github = worker_support.github  # fixtures
llm_server = llm_support.llm_server
llm = llm_support.llm

ROOT = Path(__file__).parents[3]
#: A target that answers with a JSON escape of a lone surrogate and two bytes that are not UTF-8.
BROKEN = r"""import json, sys
example = json.load(open(sys.argv[1]))
open(sys.argv[2], "wb").write(b'{"output": "' + example["input"].encode() + b' \\ud800 \xff\xfe"}')
"""
#: A target that answers with its input.
ECHO = """import json, sys
example = json.load(open(sys.argv[1]))
json.dump({"output": example["input"]}, open(sys.argv[2], "w"))
"""
#: The same as BROKEN, one JSON line per example (a ``batch: true`` target).
BROKEN_BATCH = r"""import json, sys
with open(sys.argv[2], "wb") as out:
    for line in open(sys.argv[1]):
        item = json.loads(line)
        out.write(b'{"id": "' + item["id"].encode() + b'", "output": "'
                  + item["input"].encode() + b' \\udfff"}\n')
"""
#: What the output above becomes: one replacement character per invalid sequence.
SHOWN = "alpha \ufffd \ufffd\ufffd"
NOTE_3 = ("the output was not valid Unicode: 3 invalid sequences (invalid UTF-8 or a lone "
          "surrogate such as \\ud800) replaced by U+FFFD")
NOTE_1 = ("the output was not valid Unicode: 1 invalid sequence (invalid UTF-8 or a lone "
          "surrogate such as \\ud800) replaced by U+FFFD")
FORMATS = ("junit", "markdown", "html", "sarif", "comment")


def tree(root: Path, bot: str = BROKEN, expected: str = SHOWN, batch: str = "") -> Path:
    write_tickets_tree(root, [{"id": "a", "input": "alpha", "expected": expected}], bot,
                       "      pass_rate: {min: 1.0}\n")
    if batch:
        config = root / ".llmgate.yml"
        config.write_text(config.read_text().replace("{output_file}\"}",
                                                     "{output_file}\", batch: true}"))
    git(root, "init", "-q", "-b", "main")
    return root


def cli(repo: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``llmgate run`` as its own process: its stdout is a real UTF-8 pipe, as in CI."""
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
           "LLMGATE_CACHE_DIR": str(tmp_path / "cache"), "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([sys.executable, "-m", "worker.cli", "run", *args], cwd=repo,
                          capture_output=True, text=True, timeout=120, env=env, check=False)


def test_every_report_format_writes_an_output_that_is_not_valid_unicode(tmp_path):
    repo = tree(tmp_path / "repo")
    files = {name: tmp_path / f"report.{name}" for name in FORMATS}
    done = cli(repo, tmp_path, "--format", "json",
               *(f"--format={name}:{path}" for name, path in files.items()))
    assert (done.returncode, done.stderr.count("Traceback")) == (EXIT_PASS, 0), done.stderr
    [example] = json.loads(done.stdout)["examples"]["tickets"]["head"]
    assert (example["output"], example["passed"], example["notes"]) == (SHOWN, True, [NOTE_3])
    for path in files.values():
        path.read_text(encoding="utf-8")  # each was written, and is UTF-8


def test_a_regressed_output_that_is_not_valid_unicode_is_shown_in_every_report(tmp_path):
    repo = tree(tmp_path / "repo", ECHO, expected="alpha")
    commit(repo, "main", {})
    commit(repo, "pr", {"bot.py": BROKEN})
    files = {name: tmp_path / f"report.{name}" for name in FORMATS}
    done = cli(repo, tmp_path, "--base", "main", "--head", "pr",
               *(f"--format={name}:{path}" for name, path in files.items()))
    assert (done.returncode, done.stderr.count("Traceback")) == (1, 0), done.stderr
    assert SHOWN in done.stdout  # the default markdown report, on stdout
    shown = {name: SHOWN in path.read_text(encoding="utf-8") for name, path in files.items()}
    assert shown == {"junit": True, "markdown": True, "html": True, "sarif": True,
                     "comment": True}


def test_a_batch_target_line_that_is_not_valid_unicode_is_noted(tmp_path, monkeypatch, capsys):
    repo = tree(tmp_path / "repo", BROKEN_BATCH, "alpha \ufffd", batch="yes")
    monkeypatch.chdir(repo)
    code = main(["run", "--format", "json"])
    [example] = json.loads(capsys.readouterr().out)["examples"]["tickets"]["head"]
    assert (code, example["output"], example["notes"]) == (EXIT_PASS, "alpha \ufffd", [NOTE_1])


def test_a_provider_reply_with_a_lone_surrogate_is_cached_and_reported(
        llm: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    llm.setup({"default_reply": "refund \ud800 soon"})
    repo = llm_support.write_repo(tmp_path / "repo", model_config(
        llm.url, gate="{pass_rate: {min: 1.0}}",
        assertions="      - {type: contains, value: \"refund \ufffd soon\"}\n"),
        [{"id": "a", "input": "hi"}])
    git(repo, "init", "-q", "-b", "main")
    monkeypatch.setenv(KEY_ENV, "sk-fake-test-key")
    monkeypatch.chdir(repo)
    seen = []
    for _ in range(2):  # the second answer comes from the response cache
        code = main(["run", "--format", "json"])
        [example] = json.loads(capsys.readouterr().out)["examples"]["s"]["head"]
        seen.append((code, example["output"], example["cached"], example["notes"]))
    assert seen == [(EXIT_PASS, "refund \ufffd soon", False, [NOTE_1]),
                    (EXIT_PASS, "refund \ufffd soon", True, [NOTE_1])]
    assert len(llm.calls()) == 1


async def test_app_gates_and_stores_the_baseline_of_an_output_that_is_not_valid_unicode(
        github, redis_url, tmp_path):
    dest = tree(tmp_path / "repo")
    shas = {"main": commit(dest, "main", {})}
    shas["pr"] = commit(dest, "pr", {"README.md": "a change\n"})
    await worker_support.run_jobs([gate_payload(str(dest), shas["pr"], shas["main"])])
    [run] = github.state()["check_runs"]
    assert (run["status"], run["conclusion"]) == ("completed", "success"), run["output"]
    assert github.state()["violations"] == []
    client = Redis.from_url(redis_url)
    try:
        keys = await client.keys(KEY_PREFIX + "*")
        stored = [decode(await client.get(key)) for key in keys]
    finally:
        await client.aclose()
    outputs = {(b.sha, e.output, e.notes) for b in stored for e in b.result.examples}
    assert (shas["main"], SHOWN, (NOTE_3,)) in outputs


SURROGATE_CONFIG = """version: 1
suites:
  - name: echo
    dataset: evals/d.{suffix}
    target:
      command: python3 t.py {{input_file}} {{output_file}}
    assertions:
      - type: contains
        value: "{value}"
"""


@pytest.mark.parametrize(("suffix", "dataset", "value", "where"), [
    ("jsonl", '{"id": "a", "input": "1", "expected": "x"}\n'
              '{"id": "b", "input": "1", "expected": "x\\ud800"}\n', "x", "evals/d.jsonl:2"),
    ("json", '[{"id": "a", "input": "1", "vars": {"k": "\\udfff"}}]\n', "x", "evals/d.json:1"),
    ("yaml", '- id: a\n  input: "1"\n  expected: "x\\ud800"\n', "x", "evals/d.yaml:3"),
    ("jsonl", '{"id": "a", "input": "1"}\n', "x\\ud800", ".llmgate.yml:9"),
])
def test_a_lone_surrogate_in_the_data_or_config_is_a_config_error_on_its_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        suffix: str, dataset: str, value: str, where: str) -> None:
    """Fresh user of issue 31: a ``\\ud800`` escape in a dataset or in ``.llmgate.yml`` crashed
    every run with a UnicodeEncodeError traceback and exit 1 (read as a failed gate)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "main", {".llmgate.yml": SURROGATE_CONFIG.format(suffix=suffix, value=value),
                          f"evals/d.{suffix}": dataset, "t.py": ECHO})
    monkeypatch.chdir(repo)
    assert main(["run"]) == 2
    err = capsys.readouterr().err
    assert f"{where}: a lone surrogate escape" in err and "Traceback" not in err
