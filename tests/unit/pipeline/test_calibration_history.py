"""A calibration records each example's pass share per run, and `history_of` turns the record
(file or Redis) into the gate's ``history`` (worker/pipeline/calibrate.py,
worker/pipeline/calibration_history.py)."""

from __future__ import annotations

import json

import pytest

from tests.unit.pipeline.test_calibrate import result
from worker.evals.config.load import parse_config
from worker.evals.score.metrics import suite_metrics
from worker.evals.types import RunResult, SuiteResult
from worker.pipeline.calibrate import render_json, summarize
from worker.pipeline.calibration_history import history_of

CONFIG = """\
version: 1
suites:
  - name: s
    dataset: d.jsonl
    target: {command: "x {input_file} {output_file}"}
    gate: {pass_rate: {regression: {alpha: 0.05}}}
"""


def run(flaky_passes: bool) -> RunResult:
    examples = (result(0, True), result(1, flaky_passes))
    return RunResult("", {"s": SuiteResult("s", "d.jsonl", examples, suite_metrics(examples))})


def test_the_record_keeps_each_examples_pass_share_per_run() -> None:
    cal = summarize(parse_config(CONFIG), [run(True), run(False), run(True)])
    assert cal.history == {"s": {"e0": [1.0, 1.0, 1.0], "e1": [1.0, 0.0, 1.0]}}
    assert cal.flip_rates == {"s": {"e1": 1.0}}
    record = json.loads(render_json(cal))
    assert history_of(record) == {"s": {"pass_rate": {"e0": [1.0, 1.0, 1.0],
                                                      "e1": [1.0, 0.0, 1.0]}}}


@pytest.mark.parametrize("record", [{"history": []}, {"history": {"s": []}},
                                    {"history": {"s": {"e0": [2]}}},
                                    {"history": {"s": {"e0": [True]}}}])
def test_a_malformed_history_is_refused(record: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="calibration record"):
        history_of(record)


def test_a_record_written_before_history_gives_none() -> None:
    assert history_of({"runs": 3}) == {}
