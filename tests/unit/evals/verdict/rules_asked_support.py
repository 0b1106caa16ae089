"""Hand-built runs for the rules of issue 17 (max_example_drop, max_increase_pct, group
floors, critical allowances, order metrics): a config parsed from YAML, results by id."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from worker.evals.config.load import parse_config
from worker.evals.score.metrics import suite_metrics
from worker.evals.types import (
    AssertionResult,
    Config,
    ExampleResult,
    GateReport,
    RunResult,
    SuiteResult,
)
from worker.evals.verdict.comparison import compare
from worker.evals.verdict.rules import merge_rules

DATASET = "evals/s.jsonl"


def config(gate: str) -> Config:
    """A one-suite config whose ``gate:`` section is ``gate`` (lines indented six spaces)."""
    return parse_config(f"""\
version: 1
suites:
  - name: s
    dataset: {DATASET}
    target: {{command: "bot {{input_file}} {{output_file}}"}}
    gate:
{gate}""")


def ex(i: str, score: float = 1.0, *, line: int = 1, cat: str | None = None,
       tags: tuple[str, ...] = (), repeat: int = 0, unscored: bool = False,
       errored: bool = False, latency_ms: float = 0.0, tokens: int | None = None,
       cost: float | None = None) -> ExampleResult:
    """One result of example ``i`` with a graded ``judge`` assertion (passes at 0.5)."""
    passed = score >= 0.5 and not errored
    usage = {"input": 1, "output": tokens} if tokens is not None else {}
    return ExampleResult(i, line, passed, errored, "out", "want", "boom" if errored else None,
                         (AssertionResult("judge", score >= 0.5, score),),
                         latency_ms=latency_ms, cost_usd=cost, tags=tags,
                         metadata={"category": cat} if cat else {}, repeat=repeat,
                         unscored=unscored, usage=usage)


def scored(scores: Sequence[float], **kw: Any) -> list[ExampleResult]:
    """Examples e0, e1 ... on lines 1, 2 ... with these scores."""
    return [ex(f"e{k}", s, line=k + 1, **kw) for k, s in enumerate(scores)]


def run(sha: str, results: Sequence[ExampleResult]) -> RunResult:
    return RunResult(sha, {"s": SuiteResult("s", DATASET, tuple(results),
                                            suite_metrics(results))})


def gate(cfg: Config, base: Sequence[ExampleResult] | None,
         head: Sequence[ExampleResult], head_cfg: Config | None = None) -> GateReport:
    """Compare as the worker does: base's rules (merged with head's when given)."""
    rules = cfg if head_cfg is None else merge_rules(cfg, head_cfg)[0]
    return compare(rules, run("h", head), None if base is None else run("b", base))


def statuses(report: GateReport) -> list[tuple[str, str, str]]:
    """``(rule, group, status)`` of every outcome, in report order."""
    return [(o.rule, o.group, o.status) for o in report.outcomes]
