"""Head's target on base's evaluation contract (worker/evals/verdict/contract.py): the parts the
field cases of tests/unit/cli/test_contract_cli.py do not reach.

Real trees and git repositories, the command target of tests/unit/worker_support.py and the
fake provider over real HTTP for model targets.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import context, model_config, write_repo
from tests.unit.monorepo_support import build_monorepo, service_files
from tests.unit.worker_support import DATASET, commit
from worker.cli.main import EXIT_GATE_FAILED, main
from worker.evals.config.load import parse_config
from worker.evals.verdict.contract import contract_changes, gating_config
from worker.pipeline.trees import gate_trees

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm

ROWS = [{"id": f"t{i}", "input": f"ticket {i}", "expected": f"echo: ticket {i}"}
        for i in range(1, 5)]


def test_the_verdict_runs_heads_target_on_bases_suite_and_a_new_suite_as_head_has_it(
        tmp_path: Path) -> None:
    base = parse_config(
        "version: 1\nsettings: {timeout: 9}\nsuites:\n"
        "  - {name: s, dataset: evals/old.jsonl, target: {command: 'old {input_file} "
        "{output_file}'}, assertions: [{type: equals}]}\n")
    head = parse_config(
        "version: 1\nsettings: {timeout: 1}\nsuites:\n"
        "  - {name: s, dataset: evals/new.jsonl, target: {command: 'new {input_file} "
        "{output_file}'}, assertions: [{type: contains, value: x}]}\n"
        "  - {name: n, dataset: evals/n.jsonl, target: {command: 'n {input_file} "
        "{output_file}'}}\n")
    assert gating_config(None, head, tmp_path) is head  # first adoption: head's contract
    config = gating_config(base, head, tmp_path)
    [s, n] = config.suites
    assert (s.dataset, [a.type for a in s.assertions], s.target) == (
        "evals/old.jsonl", ["equals"], head.suites[0].target)
    assert (s.contract_root, s.line) == (tmp_path, head.suites[0].line)
    assert n == head.suites[1] and n.contract_root is None
    assert config.settings.timeout_s == 9


def test_tags_and_metadata_are_part_of_the_contract(tmp_path: Path) -> None:
    text = model_config("http://127.0.0.1:9/v1")
    config = parse_config(text)
    tagged = [dict(r, tags=["must_pass"]) if r["id"] == "t1" else r for r in ROWS]
    base, head = write_repo(tmp_path / "b", text, tagged), write_repo(tmp_path / "h", text, ROWS)
    assert contract_changes(config, base, config, head) == {"s": ("labels",)}
    assert contract_changes(config, base, config, base) == {}


async def test_an_input_format_head_needs_fails_bases_examples_not_the_config(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    """Head's dataset moves to object inputs and its prompt reads ``input.text``: base's
    string inputs cannot be rendered by it, so they fail at head (never a config error, never
    dropped), and head's own contract is shown passing."""
    config = model_config(llm.url, gate="{pass_rate: {max_drop: 0.1}}",
                          assertions="      - type: contains\n        value: ticket\n")
    objects = [dict(r, input={"text": r["input"]}) for r in ROWS]
    head = write_repo(tmp_path / "head", config, objects, prompt="{{ input.text }}")
    base = write_repo(tmp_path / "base", config, ROWS, prompt="{{ input }}")
    gate = await gate_trees(head, base, evals=context())
    assert gate.config_error is None and gate.conclusion == "failure"
    assert [r.example_id for r in gate.regressions] == ["t1", "t2", "t3", "t4"]
    assert gate.regressions[0].reason.startswith(
        "head's prompt cannot be rendered for this example of base's dataset: cannot render "
        "for example 't1' (dataset line 1): ")
    [change] = gate.contract
    assert (change.changes, change.conclusion) == (("dataset_inputs",), "success")
    assert gate.headline.startswith("passes only under head's changed evaluation contract "
                                    "(s: dataset inputs)")
    assert len(llm.calls("chat")) == 8  # base's 4, head's own 4; none for the failed ones


async def test_line_number_ids_pair_exactly_when_head_runs_bases_examples(
        llm: FakeLLMServer, tmp_path: Path) -> None:
    """Without ``id`` the rules that pair examples refused head's dataset (lines move); head
    now answers base's very lines, so they pair, and a regression is found."""
    config = model_config(llm.url, gate="{pass_rate: {max_new_failures: 0}}",
                          assertions="      - type: contains\n        value: ticket 3\n")
    rows = [{"input": r["input"]} for r in ROWS]
    head = write_repo(tmp_path / "head", config, rows, prompt="{{ input | replace('3', 'x') }}")
    base = write_repo(tmp_path / "base", config, rows, prompt="{{ input }}")
    gate = await gate_trees(head, base, evals=context())
    assert gate.config_error is None and gate.contract == ()
    assert [(o.rule, o.status) for o in gate.outcomes] == [("max_new_failures 0", "regression")]
    assert [(r.example_id, r.line) for r in gate.regressions] == [("3", 3)]


@pytest.fixture(scope="module")
def monorepo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The two-service repository plus ``pr/a-relabel``: services/a's command target breaks
    ``bravo`` and its dataset relabels bravo's ``expected`` to the broken answer."""
    repo = tmp_path_factory.mktemp("contract") / "mono"
    shas = build_monorepo(repo)
    broken = service_files("services/a", "bravo")["services/a/echo.py"]
    relabelled = DATASET.replace('"expected": "bravo"', '"expected": "nope"')
    assert relabelled != DATASET
    shas["pr/a-relabel"] = commit(repo, "pr/a-relabel", {
        "services/a/echo.py": broken, "services/a/evals/echo.jsonl": relabelled})
    return repo, shas


def test_a_folder_config_is_scored_on_its_folders_base_contract(
        monorepo: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]) -> None:
    repo, _ = monorepo
    code = main(["run", "--no-cache", "--repo", str(repo), "--base", "main", "--head",
                 "pr/a-relabel", "--format", "json"])
    doc = json.loads(capsys.readouterr()[0])
    assert code == EXIT_GATE_FAILED
    a, b = (c["report"] for c in doc["configs"])
    assert (a["conclusion"], b["conclusion"]) == ("failure", "success")
    [worse] = a["regressions"]
    assert (worse["dataset"], worse["line"], worse["example_id"], worse["expected"]) == (
        "services/a/evals/echo.jsonl", 2, "bravo", "bravo")
    assert a["headline"].startswith("passes only under head's changed evaluation contract "
                                    "(echo: expected values or the set of examples)")
    assert [c["suite"] for c in a["contract"]] == ["echo"]
