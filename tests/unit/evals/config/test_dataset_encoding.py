"""Datasets, traps and prompts saved with a byte-order mark, or committed as Git LFS pointers.

Field cases: a dataset exported from a Windows spreadsheet (UTF-8 with a BOM) failed the gate
with "invalid JSON: Unexpected UTF-8 BOM (decode using utf-8-sig)"; a dataset tracked by Git
LFS reached the worker as its pointer and failed with "invalid JSON: Expecting value" on line
1, which said nothing of LFS. Both through ``llmgate run`` on a real git repository and the
gate job in a real arq worker against the schema-checking fake GitHub.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit import worker_support
from tests.unit.worker_support import CONFIG, DATASET, ECHO, commit, gate_payload, git
from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_GATE_FAILED, EXIT_PASS, main
from worker.errors import ConfigError
from worker.evals.config.dataset import load_dataset
from worker.evals.config.prompts import load_prompt, render
from worker.evals.run.traps import load_traps
from worker.evals.types import Example

github = worker_support.github  # fixture

BOM = "\ufeff"
OID = "sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393"
POINTER = f"version https://git-lfs.github.com/spec/v1\noid {OID}\nsize 12345\n"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """``main``: the echo suite, its dataset saved with a BOM (4 of 4 pass). ``pr/drop``:
    ``bravo`` breaks (fails ``max_drop``). ``pr/lfs``: the dataset replaced by its LFS
    pointer."""
    dest = tmp_path_factory.mktemp("bom") / "repo"
    dest.mkdir()
    git(dest, "init", "-q", "-b", "main")
    shas = {"main": commit(dest, "main", {".llmgate.yml": CONFIG, "echo.py": ECHO,
                                          "evals/echo.jsonl": BOM + DATASET})}
    shas["pr/drop"] = commit(dest, "pr/drop", {
        "echo.py": ECHO.replace('BROKEN = ""', 'BROKEN = "bravo"')})
    shas["pr/lfs"] = commit(dest, "pr/lfs", {"evals/echo.jsonl": POINTER})
    return dest, shas


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object], str]:
    code = main(["run", *args, "--format", "json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_cli_a_dataset_with_a_bom_is_gated(repo, monkeypatch, capsys):
    monkeypatch.chdir(repo[0])
    code, report, _ = _cli(capsys, "--base", "main", "--head", "pr/drop")
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    metrics = report["metrics"]["echo"]  # type: ignore[index]
    # 4 of 4 at base, 3 of 4 at head: the first line's example (after the BOM) is read
    assert (metrics["base"]["pass_rate"], metrics["head"]["pass_rate"]) == (1.0, 0.75)
    assert [r["example_id"] for r in report["regressions"]] == ["bravo"]
    code, report, _ = _cli(capsys, "--base", "main", "--head", "main")
    assert (code, report["conclusion"]) == (EXIT_PASS, "success")


def test_cli_an_lfs_pointer_is_reported_as_such(repo, monkeypatch, capsys):
    monkeypatch.chdir(repo[0])
    code, report, err = _cli(capsys, "--base", "main", "--head", "pr/lfs")
    assert code == EXIT_CONFIG_ERROR
    error = report["config_error"]
    assert (error["path"], error["line"]) == ("evals/echo.jsonl", 1)
    assert error["message"].startswith("this is a Git LFS pointer (sha256:4d7a214614ab...,"
                                       " 12345 bytes), not the file")
    assert "git lfs pull" in error["message"] and "invalid JSON" not in err


async def test_app_an_lfs_pointer_fails_annotated_on_the_file(github, repo):
    dest, shas = repo
    await worker_support.run_jobs([gate_payload(str(dest), shas["pr/lfs"], shas["main"])])
    [run] = github.state()["check_runs"]
    assert run["conclusion"] == "failure"
    assert run["output"]["title"] == "llmgate: configuration error in evals/echo.jsonl:1"
    [annotation] = run["annotations"]
    assert (annotation["path"], annotation["start_line"]) == ("evals/echo.jsonl", 1)
    assert "Git LFS pointer" in annotation["message"]
    assert github.state()["violations"] == []


# --------------------------------------------------------------- every file llmgate reads
def _write(root: Path, name: str, text: str) -> str:
    (root / name).write_bytes(text.encode("utf-8"))
    return name


def test_a_bom_only_at_the_start_of_a_dataset(tmp_path):
    assert [e.id for e in load_dataset(tmp_path, _write(tmp_path, "d.jsonl", BOM + DATASET))] \
        == ["alpha", "bravo", "charlie", "delta"]
    joined = BOM + DATASET + BOM + '{"id": "echo", "input": "echo"}\n'  # two files, cat
    with pytest.raises(ConfigError) as caught:
        load_dataset(tmp_path, _write(tmp_path, "j.jsonl", joined))
    assert (caught.value.line, caught.value.message) == (
        5, "a byte-order mark (U+FEFF) starts this line; only the file's first bytes may hold "
           "one: remove it")


def test_a_bom_only_at_the_start_of_a_trap_file(tmp_path):
    line = '{"id": "t", "input": "q", "output": "wrong"}\n'
    [(trap, output, _)] = load_traps(tmp_path, _write(tmp_path, "t.jsonl", BOM + line))
    assert (trap.id, output) == ("t", "wrong")
    with pytest.raises(ConfigError) as caught:
        load_traps(tmp_path, _write(tmp_path, "u.jsonl", line + BOM + line))
    assert caught.value.line == 2


@pytest.mark.parametrize(("name", "text"), [
    ("p.txt", "Answer: {{ input }}"),
    ("p.json", '[{"role": "user", "content": "Answer: {{ input }}"}]'),
    ("p.yaml", "- role: user\n  content: 'Answer: {{ input }}'\n"),
])
def test_a_bom_at_the_start_of_a_prompt_never_reaches_the_model(tmp_path, name, text):
    prompt = load_prompt(tmp_path, _write(tmp_path, name, BOM + text))
    assert render(prompt, Example("1", 1, "hi")) == [{"role": "user", "content": "Answer: hi"}]


@pytest.mark.parametrize("loader", [load_dataset, load_traps, load_prompt])
def test_an_lfs_pointer_is_named_by_every_loader(tmp_path, loader):
    with pytest.raises(ConfigError) as caught:
        loader(tmp_path, _write(tmp_path, "file.jsonl", POINTER))
    assert caught.value.line == 1 and "Git LFS pointer" in caught.value.message
    assert "`git lfs untrack file.jsonl`" in caught.value.message


def test_a_file_that_only_mentions_lfs_is_not_a_pointer(tmp_path):
    text = json.dumps({"input": "version https://git-lfs.github.com/spec/v1"}) + "\n"
    assert len(load_dataset(tmp_path, _write(tmp_path, "d.jsonl", text))) == 1

