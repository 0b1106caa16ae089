"""Retrieval assertions in whole runs: relevant_ids survive every path that rebuilds an example."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from worker.pipeline.trees import gate_trees

pytestmark = pytest.mark.slow  # the target is a process

#: A command target reporting ``vars.ids`` as its retrieved ids.
TARGET = """\
import json, sys
e = json.load(open(sys.argv[1]))
json.dump({"output": {"a": "ok"}, "retrieved_ids": e["vars"]["ids"]}, open(sys.argv[2], "w"))
"""


def _tree(root: Path, assertions: str, retrieved: list[list[str]],
          own: list[dict[str, Any]] | None = None) -> Path:
    (root / "evals").mkdir(parents=True)
    (root / "t.py").write_text(TARGET)
    (root / "s.json").write_text('{"type": "object"}')
    rows = [{"id": f"q{i}", "input": "x", "vars": {"ids": ids}, "relevant_ids": ["d1"],
             **({"assert": own} if own else {})} for i, ids in enumerate(retrieved)]
    (root / "evals" / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / ".llmgate.yml").write_text(
        "version: 1\nsuites:\n  - name: s\n    dataset: evals/d.jsonl\n    target:\n"
        "      command: python3 t.py {input_file} {output_file}\n"
        f"    assertions:\n{assertions}    gate:\n      pass_rate: {{max_drop: 0.0}}\n")
    return root


async def test_an_example_with_a_schema_file_keeps_its_relevant_ids(tmp_path: Path) -> None:
    """Field case: loading a per-example ``json_schema`` file rebuilt the example without its
    ``relevant_ids``, so its retrieval assertion failed whatever was retrieved."""
    own = [{"type": "json_schema", "file": "s.json"}]
    head = _tree(tmp_path, "      - {type: hit_at_k, k: 1}\n", [["d1"]], own)
    report = await gate_trees(head, None)
    [example] = report.head.suites["s"].examples  # type: ignore[union-attr]
    assert [(a.type, a.passed) for a in example.assertions] == [
        ("hit_at_k", True), ("json_schema", True)]


async def test_base_rescored_with_a_retrieval_assertion_head_adds_uses_relevant_ids(
        tmp_path: Path) -> None:
    """Field case: head adds ``hit_at_k`` and retrieves worse; base's outputs re-scored with
    head's assertions lost ``relevant_ids``, failed every example, and head's drop from 1.0 to
    0.5 read as a rise from 0.0: the gate passed."""
    base = _tree(tmp_path / "base", "      - {type: contains, value: ok}\n", [["d1"], ["d1"]])
    head = _tree(tmp_path / "head", "      - {type: contains, value: ok}\n"
                 "      - {type: hit_at_k, k: 1}\n", [["d1"], ["d2"]])
    report = await gate_trees(head, base)
    [change] = report.contract
    assert (change.conclusion, change.regressions) == ("failure", 1)
    assert change.metrics["hit_at_k"] == 0.5
    assert report.conclusion == "failure"
