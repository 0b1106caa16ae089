"""Custom metrics from Python (``metrics:``, worker/evals/score/custom_metrics.py): parsed with
their lines, run from the repository (confined) or from an installed package's entry point,
and gated by every rule, the paired ones on per-example metrics."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.unit.evals.verdict.rules_asked_support import ex
from worker.errors import ConfigError
from worker.evals.config.load import parse_config
from worker.evals.run.engine import run_config
from worker.evals.score.metrics import suite_metrics
from worker.evals.types import Config, MetricSpec, RunResult, SuiteResult
from worker.evals.verdict.comparison import compare

ECHO = ("import json, sys\nd = json.load(open(sys.argv[1]))\n"
        "json.dump({'output': d['input']}, open(sys.argv[2], 'w'))\n")
DATA = "".join(f'{{"id": "{w}", "input": "{w}", "expected": "{e}"}}\n'
               for w, e in (("hi", "hi"), ("hello", "hello"), ("hey", "yo"), ("howdy", "no")))
METRICS = """\
def length(result):
    return len(result["output"]) if not result["errored"] else None

def exact_share(results):
    return sum(r["passed"] for r in results) / len(results)

def boom(results):
    raise RuntimeError("no luck")

def words(results):
    return "many"
"""


def suite_text(metrics: str, gate_text: str = "") -> str:
    return ("version: 1\nsuites:\n  - name: c\n    dataset: d.jsonl\n"
            "    target: {command: 'python3 echo.py {input_file} {output_file}'}\n"
            "    assertions: [{type: equals}]\n"
            f"    metrics:\n{metrics}" + (f"    gate:\n{gate_text}" if gate_text else ""))


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "evals").mkdir(parents=True)
    (root / "echo.py").write_text(ECHO)
    (root / "d.jsonl").write_text(DATA)
    (root / "evals" / "metrics.py").write_text(METRICS)
    return root


def test_metrics_parse_with_their_lines():
    cfg = parse_config(suite_text(
        "      - {name: length, type: python, function: 'evals/m.py:length', "
        "per_example: true}\n"
        "      - name: share\n        type: python\n        entry_point: shared_share\n",
        "      custom.length: {regression: {alpha: 0.05}, max_example_drop: {by: 1}}\n"
        "      custom.share: {min: 0.5, max_drop: 0.1}\n"))
    suite = cfg.suites[0]
    assert suite.metrics == (MetricSpec("length", "evals/m.py:length", None, True, 8),
                             MetricSpec("share", None, "shared_share", False, 9))
    assert suite.gate["custom.length"].max_example_drop == 1.0
    assert suite.gate["custom.share"].min == 0.5


@pytest.mark.parametrize(("metrics", "gate_text", "line", "message"), [
    ("      - {type: python, function: 'm.py:f'}\n", "", 8, "a metric needs `name`"),
    ("      - {name: 'x y', type: python, function: 'm.py:f'}\n", "", 8,
     "a metric's `name` must be letters, digits and '_' (gate rules name it custom.<name>), "
     "got 'x y'"),
    ("      - {name: x, function: 'm.py:f'}\n", "", 8,
     "metric 'x' needs `type: python` (the only kind), got no `type`"),
    ("      - {name: x, type: sql, function: 'm.py:f'}\n", "", 8,
     "metric 'x' needs `type: python` (the only kind), got 'sql'"),
    ("      - {name: x, type: python}\n", "", 8, "metric 'x' needs exactly one of `function: "
     "path/to/file.py:fn` or `entry_point: name` (group llmgate.metrics)"),
    ("      - {name: x, type: python, function: '../m.py:f'}\n", "", 8,
     "`function` of metric 'x' must be `path/to/file.py:function_name`, a path inside the "
     "repository, got '../m.py:f'"),
    ("      - {name: x, type: python, function: 'm.py:f', per_example: yes please}\n", "", 8,
     "`per_example` of metric 'x' must be true or false, got 'yes please'"),
    ("      - {name: x, type: python, function: 'm.py:f'}\n"
     "      - {name: x, type: python, function: 'm.py:g'}\n", "", 9,
     "metric 'x' is defined twice in this suite"),
    ("      - {name: x, type: python, function: 'm.py:f'}\n", "      custom.y: {min: 0.5}\n",
     10, "'custom.y' names no metric of this suite's `metrics:` (defined: custom.x)"),
    ("      - {name: x, type: python, function: 'm.py:f'}\n",
     "      custom.x: {max_example_drop: {by: 0.1}}\n", 10,
     "`max_example_drop` of 'custom.x' compares examples one by one, but custom.x is not a "
     "mean over examples"),
    ("      - {name: x, type: python, function: 'm.py:f', per_example: true}\n",
     "      custom.x: {max: 0.5}\n", 10, "`max` of 'custom.x': higher is better"),
])
def test_bad_metrics_are_config_errors_on_their_line(metrics, gate_text, line, message):
    with pytest.raises(ConfigError) as caught:
        parse_config(suite_text(metrics, gate_text))
    assert (caught.value.path, caught.value.line) == (".llmgate.yml", line)
    assert message in caught.value.message


@pytest.mark.slow
async def test_repository_functions_run_confined_per_example_and_per_suite(repo):
    cfg = parse_config(suite_text(
        "      - {name: length, type: python, function: 'evals/metrics.py:length', "
        "per_example: true}\n"
        "      - {name: share, type: python, function: 'evals/metrics.py:exact_share'}\n"))
    suite = (await run_config(cfg, repo)).suites["c"]
    # lengths 2, 5, 3, 5: mean 3.75; two of four outputs equal their expected value
    assert [e.custom for e in suite.examples] == [{"length": 2.0}, {"length": 5.0},
                                                  {"length": 3.0}, {"length": 5.0}]
    assert (suite.metrics["custom.length"], suite.metrics["custom.share"]) == (3.75, 0.5)


@pytest.mark.slow
@pytest.mark.parametrize(("function", "message"), [
    ("evals/metrics.py:boom", "custom metric 'x': RuntimeError: no luck"),
    ("evals/metrics.py:words", "custom metric 'x': must return a finite number for the suite, "
                               "got many"),
    ("evals/nowhere.py:f", "custom metric 'x': evals/nowhere.py is not a file in the "
                           "repository (fix `function:`)"),
])
async def test_a_failing_metric_function_is_an_error_at_its_line(repo, function, message):
    cfg = parse_config(suite_text(f"      - {{name: x, type: python, function: '{function}'}}\n"))
    with pytest.raises(ConfigError) as caught:
        await run_config(cfg, repo)
    assert (caught.value.line, caught.value.message) == (8, message)


async def test_entry_point_metrics_of_installed_packages(repo, tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "shared_metrics-1.0.dist-info").mkdir(parents=True)
    (site / "shared_metrics-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: shared-metrics\nVersion: 1.0\n")
    (site / "shared_metrics-1.0.dist-info" / "entry_points.txt").write_text(
        "[llmgate.metrics]\nvowels = shared_metrics:vowels\n")
    (site / "shared_metrics.py").write_text(
        "def vowels(result):\n    return sum(c in 'aeiou' for c in result['output'])\n")
    monkeypatch.syspath_prepend(str(site))
    text = suite_text("      - {name: vowels, type: python, entry_point: vowels, "
                      "per_example: true}\n")
    suite = (await run_config(parse_config(text), repo)).suites["c"]
    # hi 1, hello 2, hey 1, howdy 1
    assert [e.custom["vowels"] for e in suite.examples] == [1.0, 2.0, 1.0, 1.0]
    assert suite.metrics["custom.vowels"] == 1.25
    with pytest.raises(ConfigError, match="no metric 'nowhere' is installed in the "
                                          "entry-point group llmgate.metrics"):
        await run_config(parse_config(text.replace("entry_point: vowels",
                                                   "entry_point: nowhere")), repo)


def custom_config(gate_text: str) -> Config:
    return parse_config("version: 1\nsuites:\n  - name: s\n    dataset: evals/s.jsonl\n"
                        "    target: {command: 'bot {input_file} {output_file}'}\n"
                        "    metrics:\n"
                        "      - {name: tone, type: python, function: 'm.py:tone', "
                        "per_example: true}\n"
                        "      - {name: share, type: python, function: 'm.py:share'}\n"
                        f"    gate:\n{gate_text}")


def test_per_example_custom_metrics_get_the_paired_rules_and_suite_ones_the_thresholds():
    def side(sha: str, tone: list[float], share: float) -> RunResult:
        results = [replace(ex(f"e{k}", 1.0, line=k + 1), custom={"tone": v})
                   for k, v in enumerate(tone)]
        metrics = suite_metrics(results) | {"custom.tone": sum(tone) / len(tone),
                                            "custom.share": share}
        return RunResult(sha, {"s": SuiteResult("s", "evals/s.jsonl", tuple(results), metrics)})

    cfg = custom_config("      custom.tone: {max_example_drop: {by: 0.2, count: 0}, "
                        "non_inferiority_margin: 0.5}\n"
                        "      custom.share: {min: 0.8, max_drop: 0.05}\n")
    report = compare(cfg, side("h", [0.9, 0.5, 0.9, 0.9], 0.85), side("b", [0.9] * 4, 0.95))
    found = {(o.metric, o.rule): (o.status, o.reason) for o in report.outcomes}
    assert found[("custom.tone", "max_example_drop 0.2 count 0")] == (
        "regression", "1 examples' custom.tone fell by more than 0.2 (allowed 0): "
                      "e1 (0.9 -> 0.5)")
    assert found[("custom.share", "min 0.80")] == ("pass", "")
    assert found[("custom.share", "max_drop 0.05")][0] == "fail"
    # the per-example metric is compared example by example; the suite-level one is not
    assert [c.metric for c in report.comparisons] == ["custom.tone"]
    assert report.comparisons[0].n == 4 and report.comparisons[0].delta == pytest.approx(-0.1)
    assert [r.line for r in report.regressions] == [2]


def test_groups_floor_per_example_custom_metrics_and_leave_suite_ones_to_the_suite():
    results = [replace(ex(f"{cat}{k}", 1.0, cat=cat), custom={"tone": v})
               for cat, values in (("a", [0.9, 0.9, 0.9]), ("b", [0.6, 0.6, 0.9]))
               for k, v in enumerate(values)]
    metrics = suite_metrics(results) | {"custom.tone": 0.8, "custom.share": 0.5}
    head = RunResult("h", {"s": SuiteResult("s", "evals/s.jsonl", tuple(results), metrics)})
    cfg = custom_config("      custom.tone: {min: 0.75}\n"
                        "      custom.share: {min: 0.4}\n"
                        "      groups: {by: category, min_items: 3}\n")
    report = compare(cfg, head, None)
    # group b: (0.6 + 0.6 + 0.9) / 3 = 0.7 < 0.75; custom.share has no group value
    assert [(o.metric, o.group, o.status) for o in report.outcomes] == [
        ("custom.tone", "", "pass"), ("custom.share", "", "pass"),
        ("custom.tone", "category=a", "pass"), ("custom.tone", "category=b", "fail")]
    assert report.outcomes[3].head == pytest.approx(0.7)


def test_stored_baselines_keep_each_examples_custom_values():
    from worker.evals.serialize import suite_result_from_json, suite_result_to_json

    results = (replace(ex("a", 0.5), custom={"tone": 0.25}), ex("b", 1.0))
    suite = SuiteResult("s", "evals/s.jsonl", results, {"custom.tone": 0.25})
    again = suite_result_from_json(suite_result_to_json(suite))
    assert [r.custom for r in again.examples] == [{"tone": 0.25}, {}]
    assert again == suite
