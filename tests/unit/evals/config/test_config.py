"""Tests of `worker.evals.config.load`: parsing, and each error with its exact line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from worker.errors import ConfigError
from worker.evals.config.load import load_config, parse_config
from worker.evals.types import AssertionSpec, GateRule, Settings
from worker.security.env_names import is_allowed_env_name

GOOD = """\
version: 1
settings: {timeout: 30, concurrency: 2, env: [OPENAI_API_KEY]}
suites:
  - name: tickets
    dataset: ./evals/tickets.jsonl
    target:
      command: python3 bot.py {input_file} {output_file}
    assertions:
      - type: equals
        ignore_case: true
      - type: contains
        values: [refund, order]
    gate:
      pass_rate:
        min: 0.80
        max_drop: 0.05
      assertion.equals.pass_rate: {min: 0.5}
  - name: other
    dataset: evals/other.jsonl
    target: {command: "bin/run --in {input_file} --out={output_file}"}
"""

SUITE_HEAD = """\
version: 1
suites:
  - name: s
    dataset: d.jsonl
    target: {command: "run {input_file} {output_file}"}
"""


def error_of(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(textwrap.dedent(text))
    return info.value


def test_parses_the_documented_format() -> None:
    config = parse_config(GOOD)
    assert config.version == 1
    assert config.path == ".llmgate.yml"
    assert config.settings == Settings(30.0, 2, ("OPENAI_API_KEY",))
    first, second = config.suites
    assert (first.name, first.dataset, first.line) == ("tickets", "evals/tickets.jsonl", 4)
    assert first.target.command == "python3 bot.py {input_file} {output_file}"
    assert first.target.line == 7
    assert first.assertions == (
        AssertionSpec("equals", {"ignore_case": True}, 9),
        AssertionSpec("contains", {"values": ["refund", "order"]}, 11),
    )
    assert list(first.gate) == ["pass_rate", "assertion.equals.pass_rate"]
    assert first.gate["pass_rate"] == GateRule("pass_rate", 0.8, 0.05, 14)
    assert first.gate["assertion.equals.pass_rate"] == GateRule(
        "assertion.equals.pass_rate", 0.5, None, 17)
    assert (second.name, second.assertions, second.gate, second.line) == ("other", (), {}, 18)


def test_defaults_when_settings_absent() -> None:
    assert parse_config(SUITE_HEAD).settings == Settings(60.0, 4, ())


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("version: 1\nsuites: [a, b\n", 3, "YAML syntax error"),
        ("version: 1\nsuites:\n  - name: a\n   bad: indent\n", 4, "YAML syntax error"),
        ("- 1\n- 2\n", 1, "must be a mapping"),
        ("", 1, "empty"),
        ("suites: []\n", 1, "missing `version`"),
        ("version: 2\nsuites: []\n", 1, "unsupported version 2"),
        ("version: true\nsuites: []\n", 1, "unsupported version true (supported: 1)"),
        ("version: 1\n", 1, "missing `suites`"),
        ("version: 1\n\nsuites: []\n", 3, "`suites` is empty"),
        ("version: 1\nsuites: {a: 1}\n", 2, "must be a list"),
        ("version: 1\nsuites: []\nextra: 1\n", 3, "unknown key 'extra' (known keys: version"),
        ("version: 1\nversion: 1\n", 2, "duplicate key 'version'"),
    ],
)
def test_top_level_errors(text: str, line: int, words: str) -> None:
    err = error_of(text)
    assert (err.path, err.line) == (".llmgate.yml", line)
    assert words in err.message


@pytest.mark.parametrize(
    ("suite", "line", "words"),
    [
        ("  - dataset: d.jsonl\n    target: {command: x}\n", 3, "a suite is missing `name`"),
        ("  - name: s\n    target: {command: x}\n", 3, "suite 's' is missing `dataset`"),
        ("  - name: s\n    dataset: d.jsonl\n", 3, "suite 's' is missing `target`"),
        ("  - name: ''\n", 3, "suite `name` must be a non-empty string"),
        ("  - name: s\n    colour: red\n", 4,
         "unknown key 'colour' (known keys: name, dataset, target, assertions, gate, traps, "
         "on_paths, type, consistency, judge, metrics, columns)"),
        ("  - name: s\n    dataset: /etc/passwd\n", 4, "must be a relative POSIX path"),
        ("  - name: s\n    dataset: evals/../../secret.jsonl\n", 4, "inside the repository"),
        ("  - name: s\n    dataset: '..'\n", 4, "inside the repository"),
        ("  - name: s\n    dataset: 'C:\\\\x.jsonl'\n", 4, "relative POSIX path"),
        ("  - name: s\n    dataset: d\n    target: python3 x.py\n", 5, "must be a mapping"),
        ("  - name: s\n    dataset: d\n    target: {cmd: x}\n", 5, "unknown key 'cmd'"),
        ("  - name: s\n    dataset: d\n    target: {}\n", 5, "`target` is missing `command`"),
        ("  - name: s\n    dataset: d\n    target:\n      command: \"x '{input_file}\"\n", 6,
         "cannot be split"),
        ("  - name: s\n    dataset: d\n    target:\n      command: x {input_file}\n", 6,
         "must pass {output_file}"),
    ],
)
def test_suite_errors(suite: str, line: int, words: str) -> None:
    err = error_of("version: 1\nsuites:\n" + suite)
    assert err.line == line
    assert words in err.message


def test_duplicate_suite_names_point_at_the_second() -> None:
    err = error_of(SUITE_HEAD + SUITE_HEAD.split("suites:\n")[1])
    assert err.line == 6
    assert "duplicate suite name 's' (first at line 3)" in err.message


@pytest.mark.parametrize(
    ("assertions", "line", "words"),
    [
        ("      - type: fuzzy\n", 7,
         "unknown assertion type 'fuzzy' (known types: equals, contains, contains_any"),
        ("      - value: x\n", 7, "an assertion is missing `type`"),
        ("      - type: contains\n", 7, "needs exactly one of `value`"),
        ("      - type: equals\n      - type: contains\n        value: a\n        values: [b]\n",
         8, "needs exactly one of"),
        ("      - type: contains\n        value: 42\n", 7, "quote numbers"),
        ("      - type: contains_any\n        values: []\n", 7, "non-empty list"),
        ("      - type: regex\n", 7, "needs `pattern`"),
        ("      - type: regex\n        pattern: '(unclosed'\n", 7, "invalid regex pattern"),
        ("      - type: equals\n        ignore_case: 'yes'\n", 7, "must be true or false"),
        ("      - type: contains\n        value: a\n        ignore_case: true\n", 7,
         "unknown option 'ignore_case' (known options: value, values, case_sensitive, normalize)"),
        ("      - just a string\n", 7, "an assertion must be a mapping"),
    ],
)
def test_assertion_errors(assertions: str, line: int, words: str) -> None:
    err = error_of(SUITE_HEAD + "    assertions:\n" + assertions)
    assert err.line == line
    assert words in err.message


@pytest.mark.parametrize(
    ("gate", "line", "words"),
    [
        ("      bleu: {min: 0.5}\n", 7, "unknown metric 'bleu' in `gate` (known metrics: "
         "pass_rate, error_rate, assertion.equals.pass_rate"),
        ("      assertion.fuzzy.pass_rate: {min: 0.5}\n", 7, "unknown metric"),
        ("      pass_rate: 0.8\n", 7, "gate metric 'pass_rate' must be a mapping"),
        ("      pass_rate: {}\n", 7, "needs `min` or `max_drop`"),
        ("      pass_rate:\n        min: 0.5\n        max: 0.9\n", 9,
         "higher is better for pass_rate (a drop is the regression), so use `min`"),
        ("      pass_rate:\n        min: 0.5\n        top: 0.9\n", 9,
         "unknown key 'top' (known keys: min, max_drop, max, max_increase, regression"),
        ("      pass_rate:\n        min: 1.5\n", 8, "`min` of 'pass_rate' must be a number from 0 "
         "to 1, got 1.5"),
        ("      pass_rate:\n        max_drop: -0.1\n", 8, "from 0 to 1"),
        ("      pass_rate:\n        min: high\n", 8, "got 'high'"),
        ("      pass_rate:\n        min: true\n", 8, "must be a number from 0 to 1, got true"),
        ("      pass_rate:\n        min: .nan\n", 8, "from 0 to 1"),
    ],
)
def test_gate_errors(gate: str, line: int, words: str) -> None:
    err = error_of(SUITE_HEAD + "    gate:\n" + gate)
    assert err.line == line
    assert words in err.message


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ("{timeout: 0}", "`timeout` must be a number of seconds > 0, got 0"),
        ("{timeout: -3}", "> 0"),
        ("{timeout: soon}", "> 0"),
        ("{concurrency: 0}", "`concurrency` must be an integer >= 1, got 0"),
        ("{concurrency: 2.5}", "integer >= 1"),
        ("{concurrency: true}", "integer >= 1"),
        ("{env: OPENAI_API_KEY}", "`env` must be a list"),
        ("{env: [1]}", "variable names"),
        ("{env: ['A B']}", "variable names"),
        ("{env: [GITHUB_TOKEN]}", "GITHUB_TOKEN cannot be passed to targets"),
        ("{env: [REDIS_URL]}", "cannot be passed"),
        ("{retries: 2}", "unknown key 'retries' (known keys: timeout, concurrency, env, "
         "repeats, cache, max_cost_usd, max_duration, retry"),
        ("[]", "`settings` must be a mapping"),
    ],
)
def test_settings_errors(settings: str, words: str) -> None:
    err = error_of(f"version: 1\nsettings: {settings}\nsuites: []\n")
    assert err.line == 2
    assert words in err.message


def test_float_timeout_and_int_concurrency_accepted() -> None:
    config = parse_config("version: 1\nsettings: {timeout: 0.5, concurrency: 8}\n"
                          + SUITE_HEAD.split("\n", 1)[1])
    assert config.settings == Settings(0.5, 8, ())


def test_env_names_allowed() -> None:
    assert is_allowed_env_name("OPENAI_API_KEY")
    assert not is_allowed_env_name("GITHUB_APP_PRIVATE_KEY")
    assert not is_allowed_env_name("github_token")
    assert not is_allowed_env_name("LLMGATE_WORKDIR")
    assert not is_allowed_env_name("REDIS_URL")
    assert not is_allowed_env_name("1BAD")


def test_python_tags_are_refused() -> None:
    err = error_of("version: !!python/object/apply:os.system ['true']\nsuites: []\n")
    assert err.line == 1
    assert "YAML value error: could not determine a constructor" in err.message


def test_error_text_names_file_and_line() -> None:
    with pytest.raises(ConfigError, match=r"^ci/gate\.yml:2: the config: unknown key 'x'"):
        parse_config("version: 1\nx: 1\n", "ci/gate.yml")


def test_load_config_absent_returns_none(tmp_path: Path) -> None:
    assert load_config(tmp_path) is None


def test_load_config_reads_the_root_file(tmp_path: Path) -> None:
    (tmp_path / ".llmgate.yml").write_text(GOOD)
    config = load_config(tmp_path)
    assert config is not None
    assert [s.name for s in config.suites] == ["tickets", "other"]


def test_load_config_refuses_a_symlink_outside(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    secret = tmp_path / "secret.yml"
    secret.write_text("version: 1\ntoken: abc\n")
    (repo / ".llmgate.yml").symlink_to(secret)
    with pytest.raises(ConfigError) as info:
        load_config(repo)
    assert info.value.line is None
    assert "inside the repository" in info.value.message


def test_load_config_error_keeps_the_line(tmp_path: Path) -> None:
    (tmp_path / ".llmgate.yml").write_text("version: 1\n\n\nsuites: 3\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert (info.value.path, info.value.line) == (".llmgate.yml", 4)


@pytest.mark.parametrize("kind", ["config", "dataset", "prompt", "traps"])
def test_a_file_that_is_not_utf8_is_an_error_on_its_line(tmp_path: Path, kind: str) -> None:
    """Field case (new-user tester): a dataset not in UTF-8 named the line, a ``.llmgate.yml``
    (or a prompt or trap file) did not, so its annotation had nowhere to go. Every file a
    config reads is decoded by one function that names the line and the byte."""
    from worker.evals.config.dataset import load_dataset
    from worker.evals.config.prompts import load_prompt
    from worker.evals.run.traps import load_traps

    loaders = {"config": (".llmgate.yml", lambda: load_config(tmp_path)),
               "dataset": ("d.jsonl", lambda: load_dataset(tmp_path, "d.jsonl")),
               "prompt": ("p.txt", lambda: load_prompt(tmp_path, "p.txt")),
               "traps": ("t.jsonl", lambda: load_traps(tmp_path, "t.jsonl"))}
    name, load = loaders[kind]
    (tmp_path / name).write_bytes(b'version: 1\n# ok\n# caf\xe9\n')
    with pytest.raises(ConfigError) as caught:
        load()
    assert (caught.value.path, caught.value.line) == (name, 3)
    assert str(caught.value).startswith(f"{name}:3: not UTF-8 text at byte 6 of the line")
