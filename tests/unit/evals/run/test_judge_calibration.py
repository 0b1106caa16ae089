"""Judge calibration per criterion on 1-5 scores: the figures are scikit-learn's and scipy's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scipy import stats

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import context, endpoint_yaml, model_config, write_repo
from worker.errors import ConfigError
from worker.evals.config.labels import parse_labels
from worker.evals.config.load import parse_config
from worker.evals.run.judge_calibration import (
    calibrate_suite,
    drift,
    load_snapshot,
    snapshot_path,
    suite_criteria,
    to_snapshot,
    write_snapshot,
)
from worker.pipeline.config_file import read_config

sklearn_metrics = pytest.importorskip("sklearn.metrics")
llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm

COMPOSITE = ("      - type: composite\n        criteria:\n"
             "          - {name: accuracy, rubric: Gets the facts right., scale: 1-5}\n"
             "          - {name: tone, rubric: Is polite.}\n")
#: The human's accuracy score of answer i, and the judge's.
HUMAN = [1, 2, 3, 4, 5, 5, 4, 2, 1, 3]
JUDGE = [1, 3, 3, 4, 4, 5, 2, 2, 2, 3]


def _setup(llm: FakeLLMServer, tmp_path: Path) -> Path:
    rules = [{"match": ["Gets the facts", f"answer {i}."], "reply": f"Reason {i}.\nSCORE: {s}"}
             for i, s in enumerate(JUDGE)]
    rules += [{"match": ["Is polite", "rude"], "reply": "VERDICT: FAIL"},
              {"match": "Is polite", "reply": "VERDICT: PASS"}]
    llm.setup({"rules": rules})
    labels = [{"id": f"a{i}", "output": f"answer {i}.", "score": s, "criterion": "accuracy"}
              for i, s in enumerate(HUMAN)]
    labels += [{"id": "t1", "output": "a rude answer", "label": "fail", "criterion": "tone"},
               {"id": "t2", "output": "a kind answer", "label": "fail", "criterion": "tone"}]
    config = model_config(llm.url, settings=f"judge: {endpoint_yaml(llm.url, 'openai/j')}",
                          assertions=COMPOSITE)
    return write_repo(tmp_path, config, [{"id": "x", "input": "x"}], files={
        "evals/labels.jsonl": "".join(json.dumps(r) + "\n" for r in labels)})


async def test_graded_criteria_match_the_reference_implementations(llm: FakeLLMServer,
                                                                  tmp_path: Path) -> None:
    root = _setup(llm, tmp_path)
    config = read_config(root)
    assert config is not None
    cal = await calibrate_suite(config.suites[0], config.settings, root, "evals/labels.jsonl",
                                context())
    accuracy, tone = cal.criteria
    assert (accuracy.name, accuracy.graded, accuracy.n) == ("accuracy", True, 10)
    scale = [1, 2, 3, 4, 5]
    assert accuracy.agreement.value == pytest.approx(0.6, abs=1e-12)
    assert accuracy.kappa.value == pytest.approx(
        sklearn_metrics.cohen_kappa_score(HUMAN, JUDGE, labels=scale), abs=1e-9)
    assert accuracy.weighted_kappa is not None and accuracy.weighted_kappa.value == \
        pytest.approx(sklearn_metrics.cohen_kappa_score(HUMAN, JUDGE, labels=scale,
                                                        weights="quadratic"), abs=1e-9)
    assert accuracy.mae is not None and accuracy.mae.value == pytest.approx(0.5, abs=1e-12)
    assert accuracy.pearson is not None and accuracy.pearson.value == pytest.approx(
        stats.pearsonr(HUMAN, JUDGE).statistic, abs=1e-9)
    assert accuracy.spearman is not None and accuracy.spearman.value == pytest.approx(
        stats.spearmanr(HUMAN, JUDGE).statistic, abs=1e-9)
    assert accuracy.agreement.low <= 0.6 <= accuracy.agreement.high
    assert [(d.id, d.human, d.judge, d.reason) for d in accuracy.disagreements][:2] == [
        ("a1", 2, 3, "Reason 1."), ("a4", 5, 4, "Reason 4.")]
    assert sum(map(sum, accuracy.confusion)) == 10
    assert (tone.graded, tone.agreement.value, tone.weighted_kappa) == (False, 0.5, None)
    assert [d.id for d in tone.disagreements] == ["t2"]

    written = write_snapshot(root, cal)
    assert written == root / "evals" / "labels.snapshot.json"
    snapshot = load_snapshot(root, "evals/labels.jsonl")
    assert snapshot == to_snapshot(cal)["criteria"]
    assert drift(cal, {"accuracy": {"agreement": 0.8}}) == {"accuracy": pytest.approx(0.2)}


async def test_rows_must_fit_the_suites_judges(llm: FakeLLMServer, tmp_path: Path) -> None:
    root = _setup(llm, tmp_path)
    config = read_config(root)
    assert config is not None
    (root / "evals" / "labels.jsonl").write_text(
        '{"id": "a", "output": "x", "label": "pass"}\n')
    with pytest.raises(ConfigError, match="several judges"):
        await calibrate_suite(config.suites[0], config.settings, root, "evals/labels.jsonl")
    (root / "evals" / "labels.jsonl").write_text(
        '{"id": "a", "output": "x", "score": 3, "criterion": "tone"}\n')
    with pytest.raises(ConfigError, match="judges pass/fail"):
        await calibrate_suite(config.suites[0], config.settings, root, "evals/labels.jsonl")


def test_snapshot_path() -> None:
    assert snapshot_path("evals/labels.jsonl") == "evals/labels.snapshot.json"
    assert snapshot_path("labels") == "labels.snapshot.json"


@pytest.mark.parametrize(("text", "error"), [
    ('{"id": "a", "output": "x"}', "exactly one of `label`"),
    ('{"id": "a", "output": "x", "score": 6}', "integer from 1 to 5"),
    ('{"id": "a", "label": "pass"}', "needs `output`"),
    ('{"output": "x", "label": "pass"}', "needs an `id`"),
    ('{"id": "a", "output": "x", "label": "pass", "who": 1}', "unknown key 'who'"),
    ('{"id": "a", "output": "x", "label": true}\n{"id": "a", "output": "y", "label": false}',
     "duplicate id 'a'"),
    ("[1]", "JSON object"),
])
def test_bad_label_rows_name_their_line(text: str, error: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_labels("\n" + text, "labels.jsonl")
    assert error in caught.value.message and caught.value.line in (2, 3)


def test_labels_parse() -> None:
    rows = parse_labels('{"id": 1, "output": {"a": 1}, "label": "PASS", "input": "q"}\n\n'
                        '{"id": "b", "output": "y", "score": 4, "criterion": "c"}\n', "l")
    assert [(r.id, r.line, r.rating, r.graded, r.criterion) for r in rows] == [
        ("1", 1, 1, False, ""), ("b", 3, 4, True, "c")]


def test_named_llm_judges_are_criteria() -> None:
    text = ("version: 1\nsettings: {judge: {model: openai/j}}\nsuites:\n  - name: s\n"
            "    dataset: d.jsonl\n    target: {command: 'x {input_file} {output_file}'}\n"
            "    assertions:\n      - {type: llm_judge, rubric: a, name: facts}\n"
            "      - {type: llm_judge, rubric: b, name: tone, model: openai/k}\n")
    config = parse_config(text)
    judges = suite_criteria(config.suites[0], config.settings)
    assert {n: j.endpoint.model for n, j in judges.items()} == {"facts": "openai/j",
                                                                "tone": "openai/k"}
    twice = text.replace("name: tone", "name: facts")
    with pytest.raises(ConfigError, match="two judges of the suite have this name"):
        suite_criteria(parse_config(twice).suites[0], config.settings)
    with pytest.raises(ConfigError, match="`name` must be non-empty text"):
        parse_config(text.replace("name: tone", "name: ''"))
