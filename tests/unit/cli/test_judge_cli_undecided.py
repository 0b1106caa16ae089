"""``llmgate judge calibrate`` with a judge that answers nothing exits 3 and writes no snapshot
(tester16's hole 2: it exited 0 and saved ``"agreement": null``)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from worker.cli.judge import EXIT_EXECUTION_ERROR
from worker.cli.main import main


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_judge_that_rates_nothing_calibrates_nothing(tmp_path: Path, monkeypatch, capsys):
    (tmp_path / "evals").mkdir()
    (tmp_path / ".llmgate.yml").write_text(f"""\
version: 1
settings:
  judge: {{model: openai/strict, api_base: "http://127.0.0.1:{closed_port()}/v1",
           api_key_env: FAKE_KEY}}
suites:
  - name: tickets
    dataset: evals/tickets.jsonl
    target: {{command: "python3 bot.py {{input_file}} {{output_file}}"}}
    assertions:
      - type: llm_judge
        rubric: Answers the customer's question.
    judge:
      labels: evals/labels.jsonl
      min_agreement: 0.8
""", encoding="utf-8")
    (tmp_path / "evals/tickets.jsonl").write_text('{"id": "t1", "input": "x"}\n')
    (tmp_path / "evals/labels.jsonl").write_text("".join(
        json.dumps({"id": f"l{i}", "output": f"o{i}", "label": "pass"}) + "\n"
        for i in range(4)))
    monkeypatch.setenv("FAKE_KEY", "fake-key-123")
    monkeypatch.chdir(tmp_path)
    code = main(["judge", "calibrate", "--suite", "tickets", "--save-snapshot", "--no-cache"])
    assert code == EXIT_EXECUTION_ERROR
    assert "could not rate 4 of 4 labels" in capsys.readouterr().err
    assert not (tmp_path / "evals/labels.snapshot.json").exists()


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
