"""Batch command targets and structured outputs, with real processes."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from worker.evals.config.load import parse_config
from worker.evals.run.batch import batch_timeout_s, run_batch
from worker.evals.run.engine import run_config
from worker.evals.score.outputs import OutputError, parse_output_document
from worker.evals.types import CommandTarget, Example, Settings

BATCH = """\
import json, os, sys
inputs = [json.loads(line) for line in open(sys.argv[1])]
with open("starts.log", "a") as log:
    log.write("start\\n")
with open(sys.argv[2], "w") as out:
    for item in reversed(inputs):  # any order
        if item["input"] == "skip":
            continue
        if item["input"] == "bad":
            out.write(json.dumps({"id": item["id"], "output": "x", "usage": "lots"}) + "\\n")
            continue
        line = {"id": item["id"], "output": item["input"].upper(), "latency_ms": 60000.0,
                "usage": {"input": 3, "output": 1}, "contexts": ["doc a"],
                "retrieved_ids": [7, "k2"]}
        out.write(json.dumps(line) + "\\n")
    out.write("not json\\n")
"""
PYTHON = shlex.quote(sys.executable)


def examples(*inputs: str) -> list[Example]:
    return [Example(f"e{i}", i + 1, text) for i, text in enumerate(inputs)]


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    (tmp_path / "batch.py").write_text(BATCH)
    return tmp_path


async def test_one_process_answers_every_example(repo: Path) -> None:
    target = CommandTarget(f"{PYTHON} batch.py {{input_file}} {{output_file}}", batch=True)
    outputs = await run_batch(target, examples("a", "skip", "bad", "d"), repo,
                              Settings(timeout_s=30))
    assert (repo / "starts.log").read_text() == "start\n"
    assert [o.output for o in outputs] == ["A", None, None, "D"]
    assert outputs[0].latency_ms == 60000.0 and outputs[0].usage == {"input": 3, "output": 1}
    assert outputs[0].contexts == ("doc a",) and outputs[0].retrieved_ids == ("7", "k2")
    assert outputs[1].error == "the batch wrote no valid output line for this id"
    assert outputs[2].error is not None and '"usage" must be' in outputs[2].error
    assert all(o.error_kind == "target" for o in outputs[1:3])


async def test_a_crashing_batch_errors_every_example(repo: Path) -> None:
    target = CommandTarget(f"{PYTHON} -c 'import sys; sys.exit(\"no model\")' "
                           "{input_file} {output_file}", batch=True)
    outputs = await run_batch(target, examples("a", "b"), repo, Settings(timeout_s=30))
    assert all(o.output is None and "no model" in (o.error or "") for o in outputs)


def test_the_batch_time_limit_scales_with_the_examples() -> None:
    assert batch_timeout_s(Settings(timeout_s=10, concurrency=4), 2) == 10
    assert batch_timeout_s(Settings(timeout_s=10, concurrency=4), 100) == 250


async def test_a_batch_suite_through_the_engine(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path_factory: pytest.TempPathFactory
                                                 ) -> None:
    # the engine runs commands in a copy of the checkout (worker/security/target_view.py):
    # the log the batch appends to is a file outside it, linked from it and made writable
    log = tmp_path_factory.mktemp("outside") / "starts.log"
    log.write_text("")
    (repo / "starts.log").symlink_to(log)
    monkeypatch.setenv("LLMGATE_SANDBOX_WRITE_PATHS", str(log))
    (repo / "d.jsonl").write_text("".join(
        json.dumps({"id": i, "input": i, "expected": i.upper()}) + "\n" for i in "xyz"))
    config = parse_config(
        "version: 1\nsuites:\n  - name: b\n    dataset: d.jsonl\n"
        f"    target: {{command: \"{PYTHON} batch.py {{input_file}} {{output_file}}\", "
        "batch: true}\n    assertions: [{type: equals}, {type: latency, max_ms: 70000}]\n")
    run = await run_config(config, repo)
    suite = run.suites["b"]
    assert [e.passed for e in suite.examples] == [True, True, True]
    assert suite.metrics["latency_p50"] == 60000.0 and suite.metrics["tokens_in_mean"] == 3
    assert log.read_text() == "start\n"


@pytest.mark.parametrize(("document", "words"), [
    ([1], 'an "output" key'), ({"output": 1, "latency_ms": -1}, "latency_ms"),
    ({"output": 1, "cost": "free"}, '"cost"'), ({"output": 1, "contexts": "a"}, "contexts"),
    ({"output": 1, "retrieved_ids": [True]}, "retrieved_ids"),
    ({"output": 1, "usage": {"input": 1.5}}, "usage"),
])
def test_invalid_structured_outputs(document: object, words: str) -> None:
    with pytest.raises(OutputError, match=words):
        parse_output_document(document, 5.0)


def test_measured_latency_is_used_when_the_target_gives_none_or_less() -> None:
    """Case from the field (tester, issue 12, H5): a bot sleeping 1.5 s per ticket wrote
    ``"latency_ms": 5`` and passed base's ``latency_p90: {max: 1000}``."""
    assert parse_output_document({"output": "x"}, 42.0).latency_ms == 42.0
    assert parse_output_document({"output": "x", "latency_ms": 3}, 42.0).latency_ms == 42.0
    assert parse_output_document({"output": "x", "latency_ms": 5}, 1500.0).latency_ms == 1500.0
    assert parse_output_document({"output": "x", "latency_ms": 50}, 42.0).latency_ms == 50.0
