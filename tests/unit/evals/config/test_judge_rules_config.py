"""A suite's ``judge:`` rules: the manual's config parses as written; mistakes name their line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from worker.errors import ConfigError
from worker.evals.config.load import parse_config
from worker.evals.types import JudgeRules

MANUAL = Path(__file__).resolve().parents[4] / "docs" / "judges.md"
SUITE = ("version: 1\nsettings: {judge: {model: openai/j}}\nsuites:\n  - name: s\n"
         "    dataset: d.jsonl\n    target: {command: 'x {input_file} {output_file}'}\n"
         "    assertions: [{type: llm_judge, rubric: ok}]\n")


def test_the_manuals_config_parses_as_written() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", MANUAL.read_text(), re.DOTALL)
    config = parse_config(blocks[0])
    assert config.suites[0].judge == JudgeRules("evals/judge-labels.jsonl", 0.8, 0.05, 14)
    composite = "version: 1\nsettings: {judge: {model: openai/j}}\nsuites:\n  - name: s\n" \
        "    dataset: d.jsonl\n    target: {command: 'x {input_file} {output_file}'}\n" + blocks[1]
    (spec,) = parse_config(composite).suites[0].assertions
    assert spec.type == "composite" and len(spec.params["criteria"]) == 2


@pytest.mark.parametrize(("judge", "error"), [
    ("{min_agreement: 0.8}", "`judge` needs `labels`"),
    ("{labels: l.jsonl, min_agreement: 80}", "`judge.min_agreement` must be a number from 0 to 1"),
    ("{labels: ../l.jsonl}", "inside the repository"),
    ("{labels: l.jsonl, max_dirft: 0.1}", "unknown key 'max_dirft'"),
    ("l.jsonl", "must be a mapping"),
])
def test_bad_judge_rules_are_config_errors_at_their_line(judge: str, error: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(SUITE + f"    judge: {judge}\n")
    assert error in caught.value.message and caught.value.line == 8
