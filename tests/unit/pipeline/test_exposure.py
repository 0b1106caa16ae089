"""Tests of `worker.pipeline.exposure`: the report's word when targets could read the eval
data (no Landlock), and on a prompt that holds the answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from worker.evals.llm_types import Endpoint, ModelTarget
from worker.evals.types import CommandTarget, Config, Settings, SuiteConfig
from worker.pipeline.exposure import exposure_notes
from worker.security import landlock, sandbox
from worker.security.sandbox import Limits, Policy, Sandbox

COMMAND = CommandTarget("python3 bot.py {input_file} {output_file}")
MODEL = ModelTarget(Endpoint("openai/m"), "prompts/p.txt")


@pytest.fixture()
def machine() -> Iterator[None]:
    """Install the sandbox a test builds; restore the process's afterwards."""
    saved = list(sandbox._current)
    yield
    sandbox._current[:] = saved


def config(*targets: CommandTarget | ModelTarget) -> Config:
    return Config(1, tuple(SuiteConfig(f"s{i}", "evals/d.jsonl", t, (), {})
                           for i, t in enumerate(targets)), Settings())


@pytest.mark.parametrize(("abi", "mode", "why"), [
    (0, "auto", "no Landlock on this machine"), (7, "off", "LLMGATE_SANDBOX=off"),
    (0, "off", "LLMGATE_SANDBOX=off"), (1, "auto", None)])
def test_a_command_target_without_landlock_is_noted(
        machine: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, abi: int, mode: str,
        why: str | None) -> None:
    monkeypatch.setattr(landlock, "abi_version", lambda: abi)
    sandbox.install(Sandbox(Limits(), Policy(mode=mode)))
    notes = exposure_notes([config(MODEL), config(COMMAND, COMMAND)], tmp_path)
    if why is None:
        assert notes == []
    else:
        assert len(notes) == 1 and notes[0].startswith(f"targets could read the eval data ({why})")
    assert exposure_notes([config(MODEL)], tmp_path) == []  # a model target runs nothing


def test_a_prompt_holding_answers_is_noted_once_per_suite(machine: None,
                                                          tmp_path: Path) -> None:
    sandbox.install(Sandbox(Limits(), Policy(mode="off")))
    (tmp_path / "evals").mkdir()
    (tmp_path / "prompts").mkdir()
    rows = [{"id": f"e{i}", "input": "q", "expected": f"the long answer number {i} of seven"}
            for i in range(7)]
    (tmp_path / "evals" / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "prompts" / "p.txt").write_text(
        "".join(f"Q: q A: {r['expected']}\n" for r in rows) + "{{ input }}")
    notes = exposure_notes([config(MODEL), config(MODEL)], tmp_path)  # base's and head's own
    assert notes == ["suite s0: head's prompt prompts/p.txt holds the expected answers of 7 "
                     "examples verbatim (e0, e1, e2, e3, e4 and 2 more; texts of 20+ characters):"
                     " a model given the answers is not tested by them"]
    (tmp_path / "prompts" / "p.txt").write_text("{% bad")  # unreadable: the run reports it
    assert exposure_notes([config(MODEL)], tmp_path) == []
