"""Fingerprints of suites: stable under formatting, sensitive to every component, split in two."""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from worker.evals.config.load import parse_config
from worker.evals.run import fingerprint
from worker.evals.run.engine import run_config
from worker.evals.types import SuiteFingerprint

ROWS = [{"id": "a", "input": "refund", "expected": "billing", "tags": ["x"],
         "metadata": {"k": 1}},
        {"id": "b", "input": "late", "expected": "shipping", "vars": {"lang": "en"}},
        {"id": "c", "input": "hi", "expected": "other",
         "assert": [{"type": "contains", "value": "o"}]}]
SCHEMA = '{"type": "object"}'


def config(*, model: str = "openai/m", params: str = "{temperature: 0}", rubric: str = "Kind.",
           judge: str = "openai/judge", assertion: str = "equals", version: str = "1") -> str:
    return f"""\
version: 1
settings:
  judge: {{model: {judge}, api_base: "http://127.0.0.1:9/v1"}}
suites:
  - name: s
    dataset: evals/d.jsonl
    target: {{model: {model}, prompt: prompts/p.txt, params: {params}, version: "{version}"}}
    traps: evals/traps.jsonl
    assertions:
      - type: {assertion}
      - type: llm_judge
        rubric: {rubric}
      - type: json_schema
        file: schemas/s.json
"""


def lines(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def write(root: Path, files: dict[str, str]) -> Path:
    defaults = {".llmgate.yml": config(), "evals/d.jsonl": lines(ROWS),
                "prompts/p.txt": "Say: {{ input }}", "schemas/s.json": SCHEMA,
                "evals/traps.jsonl": '{"input": "x", "output": "wrong"}\n'}
    for name, text in (defaults | files).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def fp(root: Path) -> SuiteFingerprint:
    parsed = parse_config((root / ".llmgate.yml").read_text())
    return fingerprint.suite_fingerprint(parsed.suites[0], parsed.settings, root)


@pytest.fixture()
def base(tmp_path: Path) -> SuiteFingerprint:
    return fp(write(tmp_path / "base", {}))


def test_digest_is_sha256_of_canonical_json() -> None:
    assert fingerprint.digest({"b": [1.0, 2], "a": "é"}) == hashlib.sha256(
        '{"a":"é","b":[1,2]}'.encode()).hexdigest()
    assert len(fingerprint.digest(None)) == 64


def test_formatting_and_line_order_do_not_change_anything(base: SuiteFingerprint,
                                                          tmp_path: Path) -> None:
    shuffled = "\n".join(json.dumps(dict(reversed(list(r.items()))), indent=None,
                                    separators=(" , ", " : ")) for r in reversed(ROWS))
    other = fp(write(tmp_path / "other", {
        "evals/d.jsonl": "\n" + shuffled + "\n\n",
        ".llmgate.yml": config(params="{temperature: 0.0}"),  # 0 == 0.0
    }))
    assert other == base


def test_tags_and_metadata_are_not_part_of_it(base: SuiteFingerprint, tmp_path: Path) -> None:
    rows = [dict(r, tags=["critical"], metadata={"k": 2}) for r in ROWS]
    assert fp(write(tmp_path / "other", {"evals/d.jsonl": lines(rows)})) == base


@pytest.mark.parametrize(("files", "outputs", "scoring"), [
    ({".llmgate.yml": config(model="openai/other")}, ["target"], []),
    ({".llmgate.yml": config(params="{temperature: 0.7}")}, ["target"], []),
    ({".llmgate.yml": config(version="2")}, ["target"], []),
    ({"prompts/p.txt": "Answer: {{ input }}"}, ["prompt"], []),
    ({"evals/d.jsonl": lines([dict(ROWS[0], input="refund!"), *ROWS[1:]])},
     ["dataset_inputs"], []),
    ({"evals/d.jsonl": lines([ROWS[0], dict(ROWS[1], vars={"lang": "de"}), ROWS[2]])},
     ["dataset_inputs"], []),
    ({"evals/d.jsonl": lines([*ROWS[:2], dict(ROWS[2], expected="billing")])},
     [], ["expected"]),
    ({"evals/d.jsonl": lines([*ROWS[:2], {**ROWS[2], "assert": [{"type": "contains",
                                                                 "value": "h"}]}])},
     [], ["expected"]),
    ({".llmgate.yml": config(assertion="json_valid")}, [], ["assertions"]),
    ({".llmgate.yml": config(assertion="json_valid\n      - type: length\n        max: 9")},
     [], ["assertions"]),
    ({"schemas/s.json": '{"type": "string"}'}, [], ["assertion_files"]),
    ({".llmgate.yml": config(judge="openai/bigger-judge")}, [], ["judges"]),
    ({".llmgate.yml": config(rubric="Kind and correct.")}, [],
     ["assertions", "judge_prompts"]),
    ({"evals/traps.jsonl": '{"input": "y", "output": "wrong"}\n'}, [], ["traps"]),
    ({"evals/d.jsonl": lines([*ROWS, {"id": "d", "input": "new", "expected": "x"}])},
     ["dataset_inputs"], ["expected"]),
])
def test_each_component_changes_its_own_digest(base: SuiteFingerprint, tmp_path: Path,
                                               files: dict[str, str], outputs: list[str],
                                               scoring: list[str]) -> None:
    other = fp(write(tmp_path / "other", files))
    assert list(fingerprint.changed(base.outputs, other.outputs)) == outputs
    assert list(fingerprint.changed(base.scoring, other.scoring)) == scoring
    assert other.digest != base.digest


def test_command_files_are_hashed_and_missing_files_do_not_raise(tmp_path: Path) -> None:
    text = ("version: 1\nsuites:\n  - name: s\n    dataset: evals/d.jsonl\n"
            '    target: {command: "python3 bot.py --fast {input_file} {output_file}"}\n')
    one = write(tmp_path / "one", {".llmgate.yml": text, "bot.py": "print(1)\n"})
    two = write(tmp_path / "two", {".llmgate.yml": text, "bot.py": "print(2)\n"})
    first, second = fp(one), fp(two)
    assert fingerprint.changed(first.outputs, second.outputs) == ("target_files",)
    assert first.outputs["target_files"] == fingerprint.digest(
        {"bot.py": hashlib.sha256(b"print(1)\n").hexdigest()})
    (one / "evals" / "d.jsonl").unlink()
    missing = fp(one)  # the run reports the missing dataset; the fingerprint still exists
    assert fingerprint.changed(first.outputs, missing.outputs) == ("dataset_inputs",)
    assert fingerprint.changed(first.scoring, missing.scoring) == ("expected",)


def test_json_round_trip_and_refusal(base: SuiteFingerprint) -> None:
    doc = json.loads(json.dumps(fingerprint.to_json(base)))
    assert fingerprint.from_json(doc) == base
    assert sorted(doc["outputs"]) == sorted(fingerprint.OUTPUT_COMPONENTS)
    assert sorted(doc["scoring"]) == sorted(fingerprint.SCORING_COMPONENTS)
    for bad in (None, {"digest": 1}, {"digest": "x", "outputs": {"a": 1}, "scoring": {}}):
        with pytest.raises(ValueError, match="fingerprint"):
            fingerprint.from_json(bad)


def test_describe_names_components_in_words() -> None:
    assert fingerprint.describe(("judges", "judge_prompts")) == (
        "judge models, judge prompts (rubric, scale)")


async def test_every_suite_result_of_a_run_carries_its_fingerprint(tmp_path: Path) -> None:
    python = shlex.quote(sys.executable)
    bot = 'import json, sys; json.dump({"output": "billing"}, open(sys.argv[2], "w"))\n'
    text = (f"version: 1\nsuites:\n  - name: s\n    dataset: evals/d.jsonl\n"
            f'    target: {{command: "{python} bot.py {{input_file}} {{output_file}}"}}\n'
            "    assertions: [{type: equals}]\n")
    root = write(tmp_path, {".llmgate.yml": text, "bot.py": bot})
    parsed = parse_config(text)
    run = await run_config(parsed, root, "a" * 40)
    assert run.suites["s"].fingerprint == fingerprint.config_fingerprints(parsed, root)["s"]
    assert run.suites["s"].metrics["pass_rate"] == pytest.approx(1 / 3)


def test_a_conversations_turn_inputs_and_turn_assertions_are_part_of_it(tmp_path: Path) -> None:
    def talk(second: str, value: str) -> dict[str, Any]:
        return {"id": "t", "turns": [{"input": "hi"}, {"input": second, "assert": [
            {"type": "contains", "value": value}]}]}

    def prints(name: str, row: dict[str, Any]) -> SuiteFingerprint:
        return fp(write(tmp_path / name, {"evals/d.jsonl": lines([*ROWS, row])}))

    one = prints("one", talk("and?", "x"))
    other_input = prints("two", talk("then?", "x"))
    other_assert = prints("three", talk("and?", "y"))
    assert other_input.outputs["dataset_inputs"] != one.outputs["dataset_inputs"]
    assert other_input.scoring == one.scoring
    assert other_assert.outputs == one.outputs
    assert other_assert.scoring["expected"] != one.scoring["expected"]
