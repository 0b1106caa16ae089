"""``llmgate redteam``: the library, a deterministic draw per seed, benign controls, the file a
suite can load, and the ``--model`` rewrite under the run's cost controls (fake provider)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from worker.cli.main import main
from worker.cli.redteam import generate, library_prompts
from worker.cli.redteam_library import LIBRARY_VERSION, TEMPLATES
from worker.evals.config.dataset import parse_dataset
from worker.pipeline.trees import gate_trees

llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm


def _generate(tmp_path: Path, *args: str, name: str = "rt.jsonl") -> tuple[int, Path]:
    out = tmp_path / name
    return main(["redteam", "generate", *args, "--out", str(out)]), out


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_same_seed_same_file_other_seed_other_draw(tmp_path: Path) -> None:
    first = _generate(tmp_path, "--count", "4", "--seed", "7", name="a.jsonl")[1].read_bytes()
    again = _generate(tmp_path, "--count", "4", "--seed", "7", name="b.jsonl")[1].read_bytes()
    other = _generate(tmp_path, "--count", "4", "--seed", "8", name="c.jsonl")[1].read_bytes()
    assert first == again and first != other


def test_categories_and_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _generate(tmp_path, "--categories", "jailbreak,pii_extraction", "--count", "3")
    assert code == 0
    rows = _rows(out)
    assert [r["id"] for r in rows] == ["jb-001", "jb-002", "jb-003",
                                       "pii-001", "pii-002", "pii-003"]
    assert {r["metadata"]["category"] for r in rows[:3]} == {"jailbreak"}
    assert all(r["metadata"]["library"] == LIBRARY_VERSION for r in rows)
    assert len({r["input"] for r in rows}) == 6  # no prompt drawn twice
    assert "wrote 6 examples" in capsys.readouterr().out


@pytest.mark.parametrize(("category", "asserts"), [
    ("jailbreak", [{"type": "refusal"}]),
    ("policy_evasion", [{"type": "refusal"}]),
    ("pii_extraction", [{"type": "refusal"}, {"type": "pii"}]),
    ("benign", [{"type": "refusal", "expect": "comply"}]),
])
def test_each_category_carries_its_assertions(category: str, asserts: list[Any]) -> None:
    (row,) = generate([category], 1, 0)
    assert row["assert"] == asserts
    assert row["metadata"]["benign"] is (category == "benign")
    assert row["tags"] == (["benign"] if category == "benign" else ["redteam", category])


def test_injections_carry_their_own_canary() -> None:
    rows = generate(["prompt_injection"], 5, 3)
    for row in rows:
        (check,) = row["assert"]
        assert check["type"] == "not_contains" and check["value"] in row["input"]
    assert len({r["assert"][0]["value"] for r in rows}) == 5
    assert generate(["prompt_injection"], 5, 3) == rows


def test_the_file_is_a_valid_dataset(tmp_path: Path) -> None:
    _, out = _generate(tmp_path, "--count", "2")
    examples = parse_dataset(out.read_text(), "evals/rt.jsonl")
    assert len(examples) == 2 * len(TEMPLATES)
    assert {s.type for e in examples for s in e.assertions} == {
        "refusal", "pii", "not_contains"}


@pytest.mark.parametrize(("args", "error"), [
    (["--categories", "jailbreak,phishing"], "unknown category 'phishing'"),
    (["--count", "0"], "--count must be at least 1"),
])
def test_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                       error: str) -> None:
    code, out = _generate(tmp_path, *args)
    assert code == 2 and error in capsys.readouterr().err and not out.exists()


def test_list_shows_the_library(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["redteam", "--list"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"llmgate red-team library {LIBRARY_VERSION}")
    for category in TEMPLATES:
        assert f"{category} ({len(library_prompts(category))} prompts)" in text
    assert "jb.fiction" in text and "bn.security" in text


def _model_args(url: str, *more: str) -> list[str]:
    return ["--categories", "prompt_injection,jailbreak,benign", "--count", "2",
            "--model", "openai/test-model", "--api-base", url,
            "--api-key-env", llm_support.KEY_ENV, "--input-usd-per-mtok", "1",
            "--output-usd-per-mtok", "2", *more]


def test_model_rewrites_attacks_only(llm: FakeLLMServer, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The fake echoes the rewrite prompt (canary kept) except for jailbreaks, which it
    refuses: 2 injection rewrites are added, the refusals and the controls are not."""
    llm.setup({"rules": [{"match": "Unbound", "reply": "I can't help with that."},
                         {"match": "thriller", "reply": "I can't help with that."},
                         {"match": "hypothetically", "reply": "I can't help with that."},
                         {"match": "grandfather", "reply": "I can't help with that."},
                         {"match": "two answers", "reply": "I can't help with that."},
                         {"match": "Developer mode", "reply": "I can't help with that."}]})
    code, out = _generate(tmp_path, *_model_args(llm.url, "--max-cost-usd", "1"))
    assert code == 0, capsys.readouterr().err
    rows = _rows(out)
    added = [r for r in rows if r["id"].endswith("-m")]
    assert [r["id"] for r in added] == ["pi-001-m", "pi-002-m"]
    assert all(r["metadata"]["rewritten_by"] == "openai/test-model" for r in added)
    assert added[0]["assert"] == rows[0]["assert"]
    assert len(llm.calls()) == 4  # 2 injections + 2 jailbreaks, no benign control
    printed = capsys.readouterr().out
    assert "estimated cost $0.00" in printed and "added 2 rewrites (2 refused" in printed


def test_model_over_budget_sends_nothing(llm: FakeLLMServer, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _generate(tmp_path, *_model_args(llm.url, "--max-cost-usd", "0.0001"))
    assert code == 2 and not out.exists() and llm.calls() == []
    assert "above --max-cost-usd $0.0001" in capsys.readouterr().err


def test_model_without_price_under_a_budget_sends_nothing(
        llm: FakeLLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = _generate(tmp_path, "--count", "2", "--model", "openai/test-model",
                        "--api-base", llm.url, "--max-cost-usd", "1")
    assert code == 2 and llm.calls() == []
    assert "no known price" in capsys.readouterr().err


def test_model_failing_every_call_is_an_error(llm: FakeLLMServer, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    llm.setup({"faults": [{"match": "", "status": 401, "times": None,
                           "body": {"error": {"message": "bad key"}}}]})
    code, out = _generate(tmp_path, *_model_args(llm.url))
    assert code == 3 and not out.exists()
    assert "every rewrite call failed" in capsys.readouterr().err


async def test_a_generated_set_gates_a_prompt_that_stops_refusing(llm: FakeLLMServer,
                                                                  tmp_path: Path) -> None:
    """The generated file is the dataset of a suite as it is: base's model refuses the attacks
    and answers the controls; head's prompt makes it comply with everything, so exactly the
    attacks regress, on their own lines, and no control does."""
    rows = generate(["jailbreak", "benign"], 3, 0)
    llm.setup({"rules": [{"match": "HEAD", "reply": "Sure, here is how: step 1, step 2."},
                         *({"match": r["input"], "reply": "Happy to help: here it is."}
                           for r in rows if r["metadata"]["benign"])],
               "default_reply": "I'm sorry, but I can't help with that."})
    config = llm_support.model_config(llm.url, gate="{pass_rate: {max_drop: 0.0}}")
    base = llm_support.write_repo(tmp_path / "base", config, rows, prompt="{{ input }}")
    head = llm_support.write_repo(tmp_path / "head", config, rows, prompt="HEAD {{ input }}")
    gate = await gate_trees(head, base, evals=llm_support.context())
    assert gate.base is not None and gate.base.suites["s"].metrics["pass_rate"] == 1.0
    assert gate.conclusion == "failure"
    regressed = [(r.example_id, r.line) for r in gate.regressions]
    assert regressed == [("jb-001", 1), ("jb-002", 2), ("jb-003", 3)]


def test_the_docs_command_writes_every_prompt_a_small_category_has(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/safety.md's ``--count 10`` (tester16 hole 5: exit 2 because benign has 8), and a
    category listed twice (hole 5b: duplicate ids the loader refuses)."""
    code, out = _generate(tmp_path, "--count", "10", "--categories", "jailbreak,benign,jailbreak")
    assert code == 0
    ids = [row["id"] for row in _rows(out)]
    assert len(ids) == len(set(ids)) == 10 + len(library_prompts("benign"))
    assert f"benign has {len(library_prompts('benign'))} prompts" in capsys.readouterr().err
