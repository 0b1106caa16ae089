"""The added assertion types: structured checks, ``similar``, custom Python, their validation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import context, endpoint_yaml, model_config, write_repo
from worker.errors import ConfigError
from worker.evals.config.load import parse_config
from worker.evals.run.engine import run_config
from worker.evals.score.assertions import check, validate_spec
from worker.evals.score.custom import to_result
from worker.evals.score.similar import cosine
from worker.evals.score.structured import check as structured_check
from worker.evals.types import AssertionSpec, Example, TargetOutput

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm

EX = Example("e", 1, "q", "billing")
SCHEMA = {"type": "object", "required": ["label"],
          "properties": {"label": {"enum": ["billing", "shipping"]}}}


@pytest.mark.parametrize(("kind", "params", "output", "passed"), [
    ("json_valid", {}, '{"a": 1}', True), ("json_valid", {}, "{a: 1}", False),
    ("json_valid", {}, {"already": "json"}, True),
    ("json_schema", {"schema": SCHEMA}, '{"label": "billing"}', True),
    ("json_schema", {"schema": SCHEMA}, '{"label": "sales"}', False),
    ("json_schema", {"schema": SCHEMA}, "not json", False),
    ("starts_with", {"value": "Dear"}, "  dear customer", True),
    ("starts_with", {"value": "Dear", "case_sensitive": True}, "dear customer", False),
    ("length", {"min": 2, "max": 5}, "abcde", True), ("length", {"max": 3}, "abcd", False),
    ("is_one_of", {"values": ["billing", "shipping"]}, " Billing\n", True),
    ("is_one_of", {"values": ["billing"]}, "billing!", False),
    ("classification", {}, "Billing", True), ("classification", {}, "shipping", False),
    ("classification", {"field": "intent.label"}, '{"intent": {"label": "billing"}}', True),
    ("classification", {"field": "label"}, '{"other": 1}', False),
    ("classification", {"labels": ["billing"]}, "refunds", False),
])
def test_structured_assertions(kind: str, params: dict[str, object], output: object,
                               passed: bool) -> None:
    spec = AssertionSpec(kind, params, 3)
    validate_spec(spec, "c.yml")
    result = check(spec, output, EX)
    assert result.passed is passed and (result.message == "") is passed


def test_schema_violations_name_the_place() -> None:
    result = check(AssertionSpec("json_schema", {"schema": SCHEMA}), '{"label": 3}', EX)
    assert result.message.startswith("schema violation at label:")


def test_latency_and_cost_read_the_target_output() -> None:
    target = TargetOutput("x", latency_ms=250.0, cost_usd=0.002)
    assert structured_check(AssertionSpec("latency", {"max_ms": 300}), "x", EX, target)[0]
    assert not structured_check(AssertionSpec("latency", {"max_ms": 200}), "x", EX, target)[0]
    assert structured_check(AssertionSpec("cost", {"max_usd": 0.002}), "x", EX, target)[0]
    unknown = TargetOutput("x")
    passed, message, _ = structured_check(AssertionSpec("cost", {"max_usd": 1}), "x", EX, unknown)
    assert not passed and "unknown" in message


@pytest.mark.parametrize(("kind", "params", "words"), [
    ("json_schema", {}, "exactly one of `schema`"),
    ("json_schema", {"schema": {"type": "nonsense"}}, "invalid JSON Schema"),
    ("length", {}, "`min` and/or `max`"), ("length", {"min": 5, "max": 2}, "larger"),
    ("latency", {"max_ms": "fast"}, "max_ms"), ("is_one_of", {"values": [1]}, "strings"),
    ("starts_with", {"value": "a", "x": 1}, "unknown option 'x'"),
    ("llm_judge", {}, "exactly one of `rubric` or `criteria`"),
    ("llm_judge", {"rubric": "r", "n": 0}, "`n` must be"),
    ("llm_judge", {"rubric": "r", "scale": "1-10"}, "`scale`"),
    ("llm_judge", {"rubric": "r", "model": "m", "api_key_env": "sk-abc123"}, "NAME"),
    ("llm_judge", {"rubric": "r", "model": "m", "api_key_env": "GITHUB_APP_PRIVATE_KEY"},
     "llmgate's own"),
    ("llm_judge", {"rubric": "r", "model": "m", "params": {"api_base": "http://x"}},
     "may not set 'api_base'"),
    ("pairwise", {"rubric": "r", "n": 3}, "takes no"),
    ("similar", {"threshold": 2}, "cosine"),
    ("python", {}, "exactly one of"), ("python", {"function": "/etc/x.py:f"}, "inside"),
    ("python", {"function": "../x.py:f"}, "inside"), ("python", {"function": "x.py"}, "path"),
])
def test_invalid_options_are_config_errors_at_their_line(kind: str, params: dict[str, object],
                                                         words: str) -> None:
    with pytest.raises(ConfigError, match=words) as info:
        validate_spec(AssertionSpec(kind, params, 9), "c.yml")
    assert (info.value.path, info.value.line) == ("c.yml", 9)


def test_cosine() -> None:
    assert cosine([1, 0], [1, 0]) == 1.0 and cosine([1, 0], [0, 1]) == 0.0
    assert cosine([0, 0], [1, 1]) == 0.0


async def test_similar_uses_embeddings_over_http(llm: FakeLLMServer, tmp_path: Path) -> None:
    llm.setup({"default_reply": "your refund was sent today"})
    config = model_config(
        llm.url, settings=f"embedding: {endpoint_yaml(llm.url, 'openai/embed-model')}",
        assertions="      - type: similar\n        threshold: 0.7\n")
    rows = [{"id": "a", "input": "q", "expected": "the refund was sent today"},
            {"id": "b", "input": "q", "expected": "parcel lost in the warehouse"}]
    run = await run_config(parse_config(config), write_repo(tmp_path, config, rows), "",
                           context())
    a, b = run.suites["s"].examples
    assert a.passed and a.assertions[0].details["similarity"] > 0.7
    assert not b.passed and b.assertions[0].details["similarity"] < 0.7
    assert len(llm.calls("embeddings")) == 2
    assert llm.calls("embeddings")[0]["input"] == ["your refund was sent today",
                                                   "the refund was sent today"]


CUSTOM = """\
import os
def polite(output, context):
    if context["id"] == "boom":
        raise ValueError("cannot grade")
    return {"pass": "please" in output, "score": 0.9, "reason": "not polite"}
def leak(output, context):
    return {"pass": True, "reason": ",".join(sorted(k for k in os.environ if "KEY" in k))}
"""


async def test_python_assertions_run_sandboxed_in_a_child(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-worker-secret")
    rows = [{"id": "ok", "input": "q", "expected": "please help"},
            {"id": "no", "input": "q", "expected": "go away"},
            {"id": "boom", "input": "q", "expected": "please"}]
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "style.py").write_text(CUSTOM)
    (tmp_path / "echo.py").write_text(
        "import json, sys\nd = json.load(open(sys.argv[1]))\n"
        "json.dump({'output': d['vars']['say']}, open(sys.argv[2], 'w'))\n")
    (tmp_path / "d.jsonl").write_text("".join(
        json.dumps({"id": r["id"], "input": "q", "vars": {"say": r["expected"]}}) + "\n"
        for r in rows))
    config = parse_config(
        "version: 1\nsuites:\n  - name: c\n    dataset: d.jsonl\n"
        "    target: {command: 'python3 echo.py {input_file} {output_file}'}\n"
        "    assertions:\n      - {type: python, function: 'checks/style.py:polite'}\n"
        "      - {type: python, function: 'checks/style.py:leak'}\n")
    run = await run_config(config, tmp_path)
    ok, no, boom = run.suites["c"].examples
    assert ok.passed and ok.assertions[0].score == 0.9
    assert not no.passed and no.assertions[0].message == "not polite"
    assert boom.unscored and boom.assertions[0].errored
    assert "ValueError: cannot grade" in boom.assertions[0].message
    assert "OPENAI_API_KEY" not in ok.assertions[1].message  # the worker's keys never leak


def test_custom_return_values() -> None:
    assert to_result(True, 0.5).passed and not to_result(False, 0.5).passed
    assert to_result(0.7, 0.5).passed and not to_result(0.3, 0.5).passed
    assert to_result({"pass": False, "reason": "rude"}, 0.5).message == "rude"
    assert to_result("yes", 0.5).errored
    for value in (float("nan"), float("inf"), {"pass": True, "score": float("-inf")}):
        result = to_result(value, 0.5)  # kept unclipped: the scorer fails the example on it
        assert not math.isfinite(result.score) and not result.errored


NON_FINITE = """
def value(output, context):
    return {"ok": 1.0, "nan": float("nan"), "inf": float("inf"), "neginf": float("-inf"),
            "dictnan": {"pass": True, "score": float("nan")}}[output]
"""


async def test_a_nan_or_infinite_value_is_an_errored_example_counted_against_the_suite(
        tmp_path: Path) -> None:
    """Field case: a custom assertion returned NaN and the example vanished from the mean."""
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "values.py").write_text(NON_FINITE)
    (tmp_path / "echo.py").write_text(
        "import json, sys\nd = json.load(open(sys.argv[1]))\n"
        "json.dump({'output': d['input']}, open(sys.argv[2], 'w'))\n")
    ids = ["ok", "nan", "inf", "neginf", "dictnan"]
    (tmp_path / "d.jsonl").write_text("".join(
        json.dumps({"id": i, "input": i}) + "\n" for i in ids))
    config = parse_config(
        "version: 1\nsuites:\n  - name: c\n    dataset: d.jsonl\n"
        "    target: {command: 'python3 echo.py {input_file} {output_file}'}\n"
        "    assertions:\n      - {type: python, function: 'checks/values.py:value'}\n")
    suite = (await run_config(config, tmp_path)).suites["c"]
    ok, *broken = suite.examples
    assert ok.passed and not ok.errored
    assert [(e.errored, e.unscored, e.passed, e.error_kind) for e in broken] == [
        (True, False, False, "not_finite")] * 4
    assert [e.error for e in broken] == [
        f"assertion `python` gave {v}, not a finite number (counted as failed)"
        for v in ("nan", "inf", "-inf", "nan")]
    assert [e.output for e in broken] == ids[1:]  # the output is kept for the report
    assert (suite.metrics["pass_rate"], suite.metrics["error_rate"]) == (0.2, 0.8)
    assert suite.metrics["mean_score"] == 0.2
    assert suite.metrics["assertion.python.pass_rate"] == 0.2


async def test_entry_point_assertions_of_installed_packages(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    (site / "shared_checks-1.0.dist-info").mkdir(parents=True)
    (site / "shared_checks-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: shared-checks\nVersion: 1.0\n")
    (site / "shared_checks-1.0.dist-info" / "entry_points.txt").write_text(
        "[llmgate.assertions]\nshort = shared_checks:short\n")
    (site / "shared_checks.py").write_text(
        "def short(output, context):\n    return len(output) <= 5\n")
    monkeypatch.syspath_prepend(str(site))
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "echo.py").write_text(
        "import json, sys\nd = json.load(open(sys.argv[1]))\n"
        "json.dump({'output': d['input']}, open(sys.argv[2], 'w'))\n")
    (repo / "d.jsonl").write_text('{"input": "tiny"}\n{"input": "far too long"}\n')
    text = ("version: 1\nsuites:\n  - name: c\n    dataset: d.jsonl\n"
            "    target: {command: 'python3 echo.py {input_file} {output_file}'}\n"
            "    assertions: [{type: python, entry_point: short}]\n")
    run = await run_config(parse_config(text), repo)
    assert [e.passed for e in run.suites["c"].examples] == [True, False]
    with pytest.raises(ConfigError, match="no assertion 'nowhere' is installed"):
        await run_config(parse_config(text.replace("short", "nowhere")), repo)
