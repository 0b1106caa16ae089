"""``llmgate run``: a target cannot read the eval data that grades it (issue 30, part 2).

The field case (tests/unit/eval_data_support.py): a pull request breaks its command target and
makes it answer with the ``expected`` values it reads from the dataset in its own checkout.
Before the fix ``llmgate run --base main --head pr/cheat`` exited 0 with the regression passed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import eval_data_support, llm_support
from tests.unit.eval_data_support import IDS, NO_LANDLOCK
from tests.unit.worker_support import clone_branches, git
from worker.cli.main import EXIT_GATE_FAILED, main
from worker.security import landlock

eval_data_repo = eval_data_support.eval_data_repo  # module fixtures
llm_server = llm_support.llm_server
llm = llm_support.llm


@pytest.fixture()
def repo(eval_data_repo: tuple[Path, dict[str, str]], tmp_path: Path,
         monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clone with every branch, as the current folder; the sandbox as this machine has it."""
    source, shas = eval_data_repo
    clone = clone_branches(source, tmp_path / "repo", shas)
    for name in ("REDIS_URL", "LLMGATE_SANDBOX", "LLMGATE_SANDBOX_READ_PATHS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(clone)
    return clone


def gate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["run", "--base", "main", "--format", "json", *args])
    out, _ = capsys.readouterr()
    return code, json.loads(out)


@pytest.mark.parametrize("where", ["--head", "working tree"])
def test_a_target_reading_the_dataset_of_its_checkout_does_not_pass_a_regression(
        repo: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    """Its checkout's dataset, ``git show`` and a sibling checkout all fail it: the 6 examples
    it broke regress, as for the same regression without the lookups (``pr/honest``)."""
    if where == "--head":
        code, report = gate(capsys, "--head", "pr/cheat")
    else:
        git(repo, "switch", "-q", "pr/cheat")
        code, report = gate(capsys)
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    assert [r["example_id"] for r in report["regressions"]] == IDS
    # the note is there exactly when this machine has no Landlock
    assert any("targets could read" in n for n in report["notes"]) == (
        landlock.abi_version() < 1)
    honest_code, honest = gate(capsys, "--head", "pr/honest")
    assert (honest_code, honest["regressions"]) == (code, report["regressions"])
    assert (repo / "evals" / "qa.jsonl").is_file()  # the user's tree keeps its data


def test_without_landlock_the_report_says_targets_could_read_the_eval_data(
        repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """No Landlock (here: ``LLMGATE_SANDBOX=off``): the copy still hides the data from the
    target's directory, but the original could be opened by path, and the report says so in
    every format."""
    monkeypatch.setenv("LLMGATE_SANDBOX", "off")
    code, report = gate(capsys, "--head", "pr/cheat")
    assert (code, len(report["regressions"])) == (EXIT_GATE_FAILED, len(IDS))
    assert sum(NO_LANDLOCK in n for n in report["notes"]) == 1
    assert main(["run", "--base", "main", "--head", "pr/cheat"]) == EXIT_GATE_FAILED
    out, _ = capsys.readouterr()
    assert NO_LANDLOCK in " ".join(out.split())


def test_a_prompt_holding_the_expected_answers_is_flagged(
        tmp_path: Path, llm: FakeLLMServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A model target's prompt that writes out the answers of the examples it is scored on is
    named in the report with those examples; a short answer (``yes``) in a prompt is not."""
    rows = [{"id": "long1", "input": "policy?", "expected": "Refunds are issued within 14 days"},
            {"id": "long2", "input": "hours?", "expected": "We are open from 9am to 5pm, Mon-Fri"},
            {"id": "other", "input": "ship?", "expected": "Shipping takes three business days"},
            {"id": "short", "input": "ok?", "expected": "yes"}]
    prompt = ("Answer yes or no when you can.\n{% set key = {'policy?': 'Refunds are issued "
              "within  14 days', 'hours?': 'we are open from 9am to 5pm, mon-fri'} %}"
              "{{ key.get(input, input) }}")
    config = ("version: 1\nsuites:\n  - name: support\n    dataset: evals/d.jsonl\n"
              f"    target: {llm_support.endpoint_yaml(llm.url)[:-1]}, prompt: prompts/p.txt}}\n"
              "    assertions: [{type: equals}]\n")
    llm_support.write_repo(tmp_path / "tree", config, rows, prompt)
    monkeypatch.chdir(tmp_path / "tree")
    main(["run", "--format", "json"])
    out, _ = capsys.readouterr()
    [note] = [n for n in json.loads(out)["notes"] if "expected answers" in n]
    assert note.startswith("suite support: head's prompt prompts/p.txt holds the expected "
                           "answers of 2 examples verbatim (long1, long2;")
