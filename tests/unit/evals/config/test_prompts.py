"""Prompt files: jinja2 templates in a sandbox, YAML and JSON chat lists, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.errors import ConfigError
from worker.evals.config.prompts import load_prompt, parse_prompt, render
from worker.evals.types import Example

EXAMPLE = Example("t1", 3, "Where is my refund?", "billing", {"lang": "de", "tier": 2})


def test_a_text_template_is_one_user_message() -> None:
    template = parse_prompt("[{{ vars.lang }}] {{ input }} (#{{ id }})", "p.txt")
    assert render(template, EXAMPLE) == [
        {"role": "user", "content": "[de] Where is my refund? (#t1)"}]


def test_a_yaml_chat_list_renders_every_message() -> None:
    text = ("- role: system\n  content: 'Answer in {{ vars.lang }}.'\n"
            "- role: user\n  content: '{{ input | upper }}'\n")
    assert render(parse_prompt(text, "p.yaml"), EXAMPLE) == [
        {"role": "system", "content": "Answer in de."},
        {"role": "user", "content": "WHERE IS MY REFUND?"}]


def test_a_json_file_may_wrap_the_list_in_messages() -> None:
    text = '{"messages": [{"role": "user", "content": "{{ input }}"}]}'
    assert render(parse_prompt(text, "p.json"), EXAMPLE)[0]["content"] == "Where is my refund?"


def test_structured_inputs_are_reachable() -> None:
    example = Example("x", 1, {"question": "why?", "history": ["a", "b"]})
    text = "{{ input.question }} after {{ input.history | length }} turns"
    assert render(parse_prompt(text, "p.txt"), example)[0]["content"] == "why? after 2 turns"


@pytest.mark.parametrize(("text", "path", "words"), [
    ("{{ input ", "p.txt", "template syntax error"),
    ("- role: robot\n  content: hi\n", "p.yaml", "role of system, user"),
    ("[]", "p.json", "list of"),
    ("{bad json", "p.json", "cannot parse"),
    ("- role: user\n  content: [1]\n", "p.yml", "text content"),
])
def test_malformed_prompt_files_are_config_errors(text: str, path: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as info:
        parse_prompt(text, path)
    assert info.value.path == path


def test_undefined_variables_and_expected_are_errors_not_blanks() -> None:
    for text in ("{{ vars.missing }}", "{{ expected }}", "{{ inptu }}"):
        with pytest.raises(ConfigError, match=r"cannot render for example 't1' \(dataset line 3\)"):
            render(parse_prompt(text, "p.txt"), EXAMPLE)


def test_the_sandbox_keeps_templates_away_from_python_internals() -> None:
    attack = "{{ ''.__class__.__mro__[1].__subclasses__() }}"
    with pytest.raises(ConfigError, match="cannot render"):
        render(parse_prompt(attack, "p.txt"), EXAMPLE)
    mutate = "{{ vars.update({'lang': 'x'}) }}"
    with pytest.raises(ConfigError):
        render(parse_prompt(mutate, "p.txt"), EXAMPLE)
    assert EXAMPLE.vars["lang"] == "de"


def test_load_prompt_stays_inside_the_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "prompts").mkdir(parents=True)
    (repo / "prompts" / "p.txt").write_text("{{ input }}")
    (tmp_path / "secret.txt").write_text("outside")
    (repo / "prompts" / "link.txt").symlink_to(tmp_path / "secret.txt")
    assert load_prompt(repo, "prompts/p.txt").messages == (("user", "{{ input }}"),)
    for path in ("prompts/link.txt", "../secret.txt", "prompts/none.txt"):
        with pytest.raises(ConfigError):
            load_prompt(repo, path)
    (repo / "prompts" / "bad.txt").write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="UTF-8"):
        load_prompt(repo, "prompts/bad.txt")
