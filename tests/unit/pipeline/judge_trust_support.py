"""Repositories for the judge-trust tests: a judged suite, human labels, two judge models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.unit.llm_support import endpoint_yaml, model_config, write_repo

#: The judge base trusts, and one that passes everything (wire names: litellm strips openai/).
GOOD, LAX = "openai/judge-good", "openai/judge-lax"
RULES: list[dict[str, Any]] = [
    {"model": "judge-good", "match": "bad answer",
     "reply": "It dodges the question.\nVERDICT: FAIL"},
    {"model": "judge-good", "match": "", "reply": "VERDICT: PASS"},
    {"model": "judge-lax", "match": "", "reply": "Looks fine to me.\nVERDICT: PASS"},
    {"match": "Customer says", "reply": "Refund sent."}]
#: Four good answers labelled pass, four bad ones labelled fail.
LABELS = [{"id": f"g{i}", "output": f"good answer {i}", "label": "pass"} for i in range(4)] + \
    [{"id": f"b{i}", "output": f"bad answer {i}", "label": "fail"} for i in range(4)]
JUDGE_RULES = "{labels: evals/labels.jsonl, min_agreement: 0.8, max_drift: 0.05}"


def judged(url: str, judge: str, rules: str = JUDGE_RULES) -> str:
    """A one-suite config judged by ``judge`` with ``judge:`` rules."""
    return model_config(url, settings=f"judge: {endpoint_yaml(url, judge)}",
                        assertions="      - type: llm_judge\n        rubric: Answers it.\n",
                        gate="{pass_rate: {min: 0.5}}", suite_extra=f"    judge: {rules}\n")


def repo(root: Path, url: str, judge: str, *, rules: str = JUDGE_RULES,
         snapshot: dict[str, Any] | None = None) -> Path:
    """Write the repository with the labels (and a snapshot) under ``root``."""
    files = {"evals/labels.jsonl": "".join(json.dumps(r) + "\n" for r in LABELS)}
    if snapshot is not None:
        files["evals/labels.snapshot.json"] = json.dumps(snapshot)
    return write_repo(root, judged(url, judge, rules),
                      [{"id": f"t{i}", "input": f"ticket {i}"} for i in range(3)], files=files)
