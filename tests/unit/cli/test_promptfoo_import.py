"""``llmgate import promptfoo`` on promptfoo's own example configs (tests/fixtures/promptfoo,
MIT, source in its README), through the real CLI; the result parses as llmgate reads it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_GATE_FAILED, main
from worker.evals.config.dataset_formats import parse_any
from worker.evals.config.load import parse_config

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "promptfoo"


@pytest.fixture()
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def converted(here: Path) -> tuple[list, list[dict]]:
    config = parse_config((here / ".llmgate.yml").read_text())
    parse_any((here / "evals/promptfoo.jsonl").read_text(), "evals/promptfoo.jsonl")
    rows = [json.loads(line) for line in (here / "evals/promptfoo.jsonl").read_text().split("\n")
            if line]
    return list(config.suites), rows


def test_getting_started_converts_every_prompt_and_provider(here, capsys):
    source = here / "src"
    shutil.copytree(FIXTURES / "getting-started", source)
    assert main(["import", "promptfoo", str(source / "promptfooconfig.yaml")]) == 0
    suites, rows = converted(here)
    assert [(s.name, s.target.endpoint.model) for s in suites] == [
        ("p1-gpt-4.1", "openai/gpt-4.1"), ("p1-o4-mini", "openai/o4-mini"),
        ("p2-gpt-4.1", "openai/gpt-4.1"), ("p2-o4-mini", "openai/o4-mini")]
    assert (here / "prompts/promptfoo_1.txt").read_text() == (
        "Convert this English to {{ vars.language }}: {{ vars.input }}\n")
    assert rows[0]["vars"] == {"language": "French", "input": "Hello world"}
    assert rows[0]["assert"] == [{"type": "contains", "value": "Bonjour le monde",
                                  "case_sensitive": True}]
    assert rows[1]["assert"] == [{"type": "contains", "value": "Dónde está la biblioteca"}]
    assert "not converted" not in capsys.readouterr().out


def test_simple_test_converts_what_it_can_and_lists_the_rest(here, capsys):
    source = here / "src"
    shutil.copytree(FIXTURES / "simple-test", source)
    assert main(["import", "promptfoo", str(source / "promptfooconfig.yaml")]) == \
        EXIT_GATE_FAILED  # 1: some parts not converted
    out = capsys.readouterr().out
    suites, rows = converted(here)
    assert [s.target.prompt for s in suites] == ["prompts/promptfoo_1.txt",
                                                 "prompts/promptfoo_2.txt"]  # split on ---
    assert rows[0]["vars"] == {"body": "Yes"}  # YAML 1.2, as promptfoo reads it: not true
    assert (rows[0]["expected"], rows[0]["assert"]) == ("Yarr", [{"type": "equals"}])
    assert rows[4]["assert"] == [{"type": "llm_judge", "rubric": "Is spoken like a pirate"},
                                 {"type": "contains", "value": "arrr"}]  # the $ref resolved
    for words in ("`outputPath`", "'is-json'", "'javascript'", "'python'", "'similar'"):
        assert words in out
    assert main(["import", "promptfoo", str(source / "promptfooconfig.yaml")]) == \
        EXIT_CONFIG_ERROR  # the files exist now
