"""bench/rate_limit.py: the figures it reads from the fake's records and the JSON report, the
quota each case sets, the generated suite, and one small case run end to end."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench import rate_limit as bench
from bench.local_services import processes
from tests.fakes.fake_rate_limit import rate_limit_config
from worker.evals.config.load import parse_config


def _call(t: float, status: int = 200) -> dict[str, Any]:
    return {"t": t, "status": status}


def test_the_span_runs_from_the_first_request_to_the_last_answer() -> None:
    calls = [_call(10.0), _call(10.05, 429), _call(10.2), _call(12.0), _call(12.05, 429)]
    figures = bench.call_figures(calls, latency_s=0.1)
    assert (figures.requests, figures.refused, figures.answered) == (5, 2, 3)
    assert figures.first_t == 10.0
    assert figures.span_s == pytest.approx(2.1)  # 12.0 answered at 12.1; the 429 at once
    assert bench.call_figures([], 0.1).requests == 0


def test_calls_per_second_from_the_first_request() -> None:
    calls = [_call(5.0), _call(5.1, 429), _call(5.9), _call(7.2)]
    assert bench.timeline(calls, 5.0) == "2/1 0/0 1/0"
    assert bench.timeline([], 5.0) == "no calls"


def test_every_example_must_have_an_output_and_no_error() -> None:
    rows = [{"id": "e0", "output": "echo", "error": None, "errored": False},
            {"id": "e1", "output": None, "error": "rate limited (HTTP 429)", "errored": True},
            {"id": "e2", "output": None, "error": None, "errored": False}]
    report = {"examples": {bench.SUITE: {"base": None, "head": rows}}}
    assert bench.report_problems(report, ["e0"]) == []
    assert bench.report_problems(report, ["e0", "e1", "e2", "e3"]) == [
        "e1: rate limited (HTTP 429)", "e2: no output", "e3: missing"]
    assert bench.report_problems(None, ["e0"]) == ["no examples in the report"]
    usage = {"usage": {"head": {"spend": {"tokens": {"input": 4200}}}}}
    assert bench.input_tokens(usage) == 4200
    assert bench.input_tokens(report) is None


def test_each_case_sets_a_quota_the_fake_accepts_and_the_token_case_allows_rps_calls() -> None:
    for case in bench.CASES:
        limit = rate_limit_config(bench.rate_limit(case, 20.0, 221))
        assert limit is not None and limit["announce"] == case.announce
    tokens = rate_limit_config(bench.rate_limit(
        next(c for c in bench.CASES if c.tokens), 20.0, 221))
    assert tokens is not None and tokens["requests_per_s"] == bench.TOKEN_CASE_RPS
    assert tokens["tokens_per_min"] / 60 / 221 == pytest.approx(20.0)  # 20 calls of 221 a second
    assert bench.BEFORE_CASES == ("retry_after_ms", "headers")


def test_the_generated_suite_parses_with_its_concurrency_endpoint_and_max_tokens() -> None:
    config = parse_config(bench.config_text("http://127.0.0.1:9/v1", 7, 200))
    suite = config.suites[0]
    assert config.settings.concurrency == 7 and suite.name == bench.SUITE
    endpoint = suite.target.endpoint  # type: ignore[union-attr]
    assert endpoint.api_base == "http://127.0.0.1:9/v1" and endpoint.api_key_env == bench.KEY_ENV
    assert endpoint.params == {"max_tokens": 200}
    assert "params" not in bench.config_text("http://127.0.0.1:9/v1", 7, None)
    # Every prompt differs and has the same length (the token case's calls cost the same).
    assert len({bench.prompt_of(i) for i in range(1000)}) == 1000
    assert len({len(bench.prompt_of(i)) for i in range(1000)}) == 1


def _outcome(refused: int, lost: list[str], codes: list[int]) -> bench.Outcome:
    figures = bench.CallFigures(100 + refused, refused, 100, 0.0, 5.5)
    return bench.Outcome(bench.CASES[0], "this", 100, 5.0, figures, 4.2, 10.0, codes, lost)


def test_an_outcome_fails_on_a_lost_example_an_undecided_run_or_5_percent_of_429s() -> None:
    good = _outcome(4, [], [0])
    assert good.ratio == pytest.approx(1.1) and good.problems() == []
    assert good.row() == ("| retry_after_ms | this | 0 | 100/100 | 104 | 4 | 3.8% | 4.2 | 5.50 | "
                          "5.00 | 1.100 | 10.0 |")
    assert len(bench.table([good])) == 3
    assert bench.table([good])[1].count("---") == bench.HEADER.count("|") - 1
    problems = _outcome(6, ["e3: no output"], [4]).problems()
    assert [p.split(": ")[1] for p in problems] == [
        "1 of 100 examples lost, e.g. e3", "exit codes [4] (0 or 1 expected)",
        "6 of 106 requests answered 429 (5.7%, goal < 5%)"]


@pytest.mark.slow
def test_a_small_case_counts_what_the_fake_saw(tmp_path: Path) -> None:
    args = argparse.Namespace(calls=12, rps=10.0, latency_ms=50.0, concurrency=4)
    case = next(c for c in bench.CASES if c.name == "headers")
    with processes(tmp_path, args.latency_ms) as (url, redis_url), httpx.Client() as http:
        run = bench.Bench(args, tmp_path, url, redis_url, http)
        outcome = run.run_case(case, bench.Code("this", bench.ROOT))
        counted = run.fake("state")["rate_limit"]
    assert outcome.exit_codes == [0] and outcome.lost == []
    assert outcome.figures.answered == 12 == counted["admitted"]
    assert outcome.figures.refused == counted["refused"]
    assert outcome.floor_s == pytest.approx(1.2) and outcome.startup_s > 0
    assert 0 < outcome.figures.span_s < outcome.wall_s
    state = json.loads((tmp_path / "headers-this" / "fake-state.json").read_text())
    assert {c["authorization"] for c in state["calls"]} == {"Bearer bench-headers-this"}
