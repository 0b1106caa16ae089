"""Tests of `worker.evals.config.dataset`: JSONL parsing, errors with lines, and path safety."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.errors import ConfigError
from worker.evals.config.dataset import load_dataset, parse_dataset
from worker.evals.types import AssertionSpec, Example

GOOD = (
    '{"id": "a", "input": "hi", "expected": "hello", "vars": {"lang": "en"}}\n'
    "\n"
    '{"input": {"q": [1, 2]}, "assert": [{"type": "contains", "value": "x"}]}\n'
    '   \n'
    '{"id": 7, "input": "z\u2028still the same line"}\n'
)


def test_parses_examples_with_lines() -> None:
    examples = parse_dataset(GOOD, "evals/d.jsonl")
    assert examples == (
        Example("a", 1, "hi", "hello", {"lang": "en"}),
        Example("3", 3, {"q": [1, 2]}, None, {},
                (AssertionSpec("contains", {"value": "x"}, 3),), id_from_line=True),
        Example("7", 5, "z\u2028still the same line"),
    )


def test_empty_file_gives_no_examples() -> None:
    assert parse_dataset("\n\n", "d.jsonl") == ()


def test_crlf_lines_are_accepted() -> None:
    examples = parse_dataset('{"input": 1}\r\n{"input": 2}\r\n', "d.jsonl")
    assert [(e.id, e.input) for e in examples] == [("1", 1), ("2", 2)]


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('{"input": 1}\n{"input": 2,}\n', 2, "invalid JSON"),
        ('{"input": 1}\n\n[1, 2]\n', 3, "must be a JSON object, got list"),
        ('{"expected": 1}\n', 1, "missing `input`"),
        ('{"id": "x", "input": 1}\n{"id": "x", "input": 2}\n', 2,
         "duplicate id 'x' (first used at line 1)"),
        ('{"input": 1}\n{"id": "1", "input": 2}\n', 2, "duplicate id '1'"),
        ('{"id": 1.5, "input": 1}\n', 1, "`id` must be a non-empty string or an integer"),
        ('{"id": true, "input": 1}\n', 1, "`id` must be"),
        ('{"id": "", "input": 1}\n', 1, "`id` must be"),
        ('{"input": 1, "expect": 2}\n', 1, "unknown key 'expect' (known keys: id, input"),
        ('{"input": 1, "vars": [1]}\n', 1, "`vars` must be a JSON object"),
        ('{"input": 1, "assert": {"type": "regex"}}\n', 1, "`assert` must be a list"),
        ('{"input": 1, "assert": ["regex"]}\n', 1, "object with a `type`"),
        ('\n\n{"input": 1, "assert": [{"type": "regex", "pattern": "("}]}\n', 3,
         "invalid regex pattern"),
        ('{"input": 1, "assert": [{"type": "sounds_like"}]}\n', 1, "unknown assertion type"),
    ],
)
def test_errors_name_file_and_line(text: str, line: int, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_dataset(text, "evals/d.jsonl")
    assert (info.value.path, info.value.line) == ("evals/d.jsonl", line)
    assert words in info.value.message


def test_load_dataset_reads_inside_root(tmp_path: Path) -> None:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "d.jsonl").write_text(GOOD, encoding="utf-8")
    assert len(load_dataset(tmp_path, "evals/d.jsonl")) == 3


def test_missing_dataset_has_no_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_dataset(tmp_path, "evals/nope.jsonl")
    assert (info.value.path, info.value.line) == ("evals/nope.jsonl", None)
    assert "not found" in info.value.message


def test_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "evals").mkdir()
    with pytest.raises(ConfigError, match="not a regular file"):
        load_dataset(tmp_path, "evals")


@pytest.mark.parametrize("rel_path", ["../outside.jsonl", "evals/../../outside.jsonl"])
def test_dotdot_escape_is_refused(tmp_path: Path, rel_path: str) -> None:
    repo = tmp_path / "repo"
    (repo / "evals").mkdir(parents=True)
    (tmp_path / "outside.jsonl").write_text('{"input": 1}\n')
    with pytest.raises(ConfigError, match="outside the repository"):
        load_dataset(repo, rel_path)


def test_absolute_path_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "d.jsonl"
    target.write_text('{"input": 1}\n')
    with pytest.raises(ConfigError, match="must be relative"):
        load_dataset(tmp_path, str(target))


def test_symlink_escape_is_refused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"input": "the worker secret"}\n')
    (repo / "d.jsonl").symlink_to(secret)
    with pytest.raises(ConfigError, match="outside the repository"):
        load_dataset(repo, "d.jsonl")


def test_symlink_inside_is_followed(tmp_path: Path) -> None:
    (tmp_path / "real.jsonl").write_text('{"input": 1}\n')
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "real.jsonl")
    assert load_dataset(tmp_path, "link.jsonl")[0].input == 1


def test_non_utf8_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_bytes(b'{"input": "\xff"}\n')
    with pytest.raises(ConfigError, match="UTF-8"):
        load_dataset(tmp_path, "d.jsonl")


def test_non_utf8_error_names_line_and_byte(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_bytes(b'{"input": "ok"}\n{"input": "caf\xe9"}\n')
    with pytest.raises(ConfigError) as caught:
        load_dataset(tmp_path, "d.jsonl")
    assert caught.value.line == 2
    assert str(caught.value).startswith("d.jsonl:2: not UTF-8 text at byte 15 of the line")


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_dataset_without_examples_is_a_config_error(tmp_path: Path, content: str) -> None:
    (tmp_path / "d.jsonl").write_text(content)
    with pytest.raises(ConfigError, match="the dataset has no examples"):
        load_dataset(tmp_path, "d.jsonl")
