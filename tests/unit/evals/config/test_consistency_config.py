"""Consistency suites: their config, multiple-choice datasets and seeded perturbations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worker.errors import ConfigError
from worker.evals.config import perturbations
from worker.evals.config.consistency import expand, load_suite_dataset
from worker.evals.config.load import parse_config
from worker.evals.config.mc_dataset import MCOption, MCQuestion, parse_questions
from worker.evals.types import ConsistencySpec, PerturbationSpec

QUESTION = {"id": "q1", "stem": "Capital of France?", "options": [
    {"label": "A", "text": "Lyon", "is_correct": False},
    {"label": "B", "text": "Paris", "is_correct": True},
    {"label": "C", "text": "Nice", "is_correct": False}]}
CONFIG = """version: 1
suites:
  - name: quiz
    type: consistency
    dataset: q.jsonl
    target:
      command: python3 bot.py {input_file} {output_file}
    consistency:
      perturbations:
        - {type: option_reorder, num_variants: 3}
        - {type: separator_change, num_variants: 1}
      seed: 7
      mca_threshold: 0.8
    gate:
      rc_agree: {min: 0.9, regression: {alpha: 0.05}}
      core: {min: 0.5}
"""


def test_config_of_a_consistency_suite() -> None:
    (suite,) = parse_config(CONFIG).suites
    assert suite.consistency == ConsistencySpec(
        (PerturbationSpec("option_reorder", 3), PerturbationSpec("separator_change", 1)),
        seed=7, mca_threshold=0.8)
    assert [s.type for s in suite.assertions] == ["mc_answer"]
    assert set(suite.gate) == {"rc_agree", "core"}


@pytest.mark.parametrize(("change", "line", "words"), [
    ("type: consistency", 4, "suite `type` must be one of"),
    ("{type: option_reorder, num_variants: 3}", 10, "unknown perturbation 'shuffle'"),
    ("seed: 7", 12, "`seed` must be an integer"),
    ("core: {min: 0.5}", 16, "unknown metric"),
])
def test_config_errors_name_the_line(change: str, line: int, words: str) -> None:
    broken = {"type: consistency": "type: quiz",
              "{type: option_reorder, num_variants: 3}": "{type: shuffle}",
              "seed: 7": "seed: seven", "core: {min: 0.5}": "rc_nope: {min: 0.5}"}[change]
    with pytest.raises(ConfigError) as caught:
        parse_config(CONFIG.replace(change, broken))
    assert caught.value.line == line and words in caught.value.message, caught.value


def test_assertions_are_refused_on_a_consistency_suite() -> None:
    text = CONFIG.replace("    consistency:\n", "    assertions: [{type: equals}]\n"
                          "    consistency:\n")
    with pytest.raises(ConfigError, match="takes no `assertions`"):
        parse_config(text)


def test_json_jsonl_and_csv_give_the_same_questions() -> None:
    jsonl = parse_questions(json.dumps(QUESTION) + "\n", "q.jsonl")
    listed = parse_questions(json.dumps([QUESTION], indent=2), "q.json")
    csv = parse_questions("id,stem,option_a,option_b,option_c,correct\n"
                          "q1,Capital of France?,Lyon,Paris,Nice,B\n", "q.csv")
    assert listed[0].line == 2  # where its object opens
    assert jsonl == (MCQuestion("q1", "Capital of France?", (
        MCOption("A", "Lyon", False), MCOption("B", "Paris", True),
        MCOption("C", "Nice", False)), 1),)
    assert csv[0].options == listed[0].options == jsonl[0].options and csv[0].line == 2
    assert parse_questions(json.dumps([QUESTION, {**QUESTION, "id": "q2"}], indent=2),
                           "q.json")[1].line == 23


@pytest.mark.parametrize(("doc", "words"), [
    ({**QUESTION, "options": QUESTION["options"][:1]}, "at least two options"),
    ({**QUESTION, "options": [{**o, "is_correct": True} for o in QUESTION["options"]]},
     "exactly one option"),
    ({"id": "q1", "stem": ""}, "`stem`"),
    ({**QUESTION, "answer": "B"}, "unknown key 'answer'"),
    ({**QUESTION, "options": [*QUESTION["options"], {"label": "D", "text": "paris  "}]},
     "options B and D have the same text 'paris'"),
    ({**QUESTION, "options": [*QUESTION["options"], {"label": "D", "text": "NICE"}]},
     "options C and D have the same text"),
])
def test_malformed_questions(doc: dict, words: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigError, match=words) as caught:
        parse_questions("\n" + json.dumps(doc) + "\n", "q.jsonl")
    assert caught.value.line == 2


def _question() -> MCQuestion:
    return parse_questions(json.dumps(QUESTION), "q.jsonl")[0]


def test_variants_are_seeded_and_the_original_comes_first() -> None:
    spec = ConsistencySpec((PerturbationSpec("option_reorder", 5),
                            PerturbationSpec("format_change", 2),
                            PerturbationSpec("separator_change", 2)), seed=3)
    examples = expand((_question(),), spec, "q.jsonl")
    assert examples == expand((_question(),), spec, "q.jsonl")
    assert [e.id for e in examples][:2] == ["q1#v0", "q1#v1"]
    assert examples[0].input == "Capital of France?\nA. Lyon\nB. Paris\nC. Nice"
    assert examples[0].expected == "B" and examples[0].vars["labels"] == "A, B, C"
    reorders = [e for e in examples if e.vars["perturbation"] == "option_reorder"]
    assert len(reorders) == 5  # every order of three options but the original
    assert len({e.input for e in reorders} | {examples[0].input}) == 6
    for e in reorders:  # the right answer's label moves with Paris
        shown = {o["text"]: o["label"] for o in e.vars["options"]}
        assert e.expected == shown["Paris"]
    other = expand((_question(),), ConsistencySpec(spec.perturbations, seed=4), "q.jsonl")
    assert [e.input for e in other] != [e.input for e in examples]
    assert len(examples) == 1 + 5 + 2 + 2


def test_custom_perturbation_from_an_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    def upper(question: MCQuestion, n: int, seed: int) -> list[perturbations.Variant]:
        """Shout the stem."""
        v = perturbations.original(question)
        return [perturbations.Variant(v.text.upper(), v.options)]

    class Point:
        name = "shout"

        def load(self) -> object:
            return upper

    monkeypatch.setattr(perturbations, "installed", lambda: {"shout": Point()})
    examples = expand((_question(),), ConsistencySpec((PerturbationSpec("shout", 1),)), "q")
    assert examples[1].input.startswith("CAPITAL OF FRANCE?")
    assert perturbations.describe("shout") == "Shout the stem."

    def broken(question: MCQuestion, n: int, seed: int) -> list[perturbations.Variant]:
        return [perturbations.Variant("x", perturbations.original(question).options[:1])]

    monkeypatch.setattr(Point, "load", lambda self: broken)
    with pytest.raises(ConfigError, match="does not show each option once") as caught:
        expand((_question(),), ConsistencySpec((PerturbationSpec("shout", 1),)), "q.jsonl")
    assert caught.value.path == "q.jsonl"


def test_load_suite_dataset_reads_the_checkout(tmp_path: Path) -> None:
    (tmp_path / "q.jsonl").write_text(json.dumps(QUESTION) + "\n")
    (suite,) = parse_config(CONFIG).suites
    examples = load_suite_dataset(tmp_path, suite)
    assert len(examples) == 1 + 3 + 1


def test_mc_answer_belongs_to_consistency_suites() -> None:
    text = CONFIG.replace("    type: consistency\n", "    assertions: [{type: mc_answer}]\n")
    text = text[:text.index("    consistency:")]
    with pytest.raises(ConfigError, match="`mc_answer` is the assertion of"):
        parse_config(text)


def test_the_manuals_config_parses() -> None:
    text = (Path(__file__).resolve().parents[4] / "docs" / "consistency.md").read_text()
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    (suite,) = parse_config(block).suites
    assert suite.consistency is not None and len(suite.consistency.perturbations) == 3
    assert suite.gate["unparseable_rate"].max == 0.02


def test_variants_x_questions_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from worker.evals.config import consistency

    monkeypatch.setattr(consistency, "MAX_EXAMPLES", 10)
    many = tuple(MCQuestion(f"q{i}", "?", _question().options, i + 1) for i in range(3))
    spec = ConsistencySpec((PerturbationSpec("option_reorder", 3),))
    assert len(expand(many[:2], spec, "q.jsonl")) == 8
    with pytest.raises(ConfigError, match="more than 10 examples") as caught:
        expand(many, spec, "q.jsonl")
    assert caught.value.line == 3
