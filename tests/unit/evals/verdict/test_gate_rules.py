"""Where the rules come from: base's config, or the stricter of base and head (rules.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.worker_support import write_tickets_tree
from worker.evals.config.load import parse_config
from worker.evals.types import GateOptions, GateRule
from worker.evals.verdict.rules import merge_rules, stricter_options, stricter_rule
from worker.pipeline.trees import gate_trees

BASE = """\
version: 1
suites:
  - name: tickets
    dataset: evals/t.jsonl
    target: {command: "run {input_file} {output_file}"}
    gate:
      pass_rate: {min: 0.8, max_drop: 0.05, regression: {alpha: 0.05}, max_new_failures: 1}
      critical: {tag: must_pass}
      on_inconclusive: neutral
      quarantine: [a, b]
  - name: faq
    dataset: evals/f.jsonl
    target: {command: "run {input_file} {output_file}"}
    gate:
      pass_rate: {min: 0.5}
"""

HEAD = """\
version: 1
suites:
  - name: tickets
    dataset: evals/t.jsonl
    target: {command: "run2 {input_file} {output_file}"}
    gate:
      pass_rate: {min: 0.7, max_drop: 0.01, regression: {alpha: 0.01}}
      error_rate: {max_increase: 0.1}
      critical: {tag: smoke}
      on_inconclusive: pass
      quarantine: [b, c]
  - name: new
    dataset: evals/n.jsonl
    target: {command: "run {input_file} {output_file}"}
"""


def test_a_pull_request_cannot_loosen_its_gate() -> None:
    merged, notes = merge_rules(parse_config(BASE), parse_config(HEAD))
    tickets, new, faq = merged.suites
    assert (tickets.name, new.name, faq.name) == ("tickets", "new", "faq")
    assert tickets.target.command == "run2 {input_file} {output_file}"  # head's suite
    rule = tickets.gate["pass_rate"]
    assert (rule.min, rule.max_drop, rule.regression_alpha, rule.max_new_failures) == (
        0.8, 0.01, 0.05, 1)
    assert tickets.gate["error_rate"] == GateRule("error_rate", line=8, max_increase=0.1)
    options = tickets.gate_options
    assert (options.critical_tags, options.on_inconclusive, options.quarantine) == (
        ("must_pass", "smoke"), "neutral", ("b",))
    assert faq.gate["pass_rate"].min == 0.5  # removed at head: base's rules still apply
    assert notes[0].startswith("gate rules of tickets changed at head (pass_rate min: 0.8 -> 0.7;"
                               " pass_rate max_drop: 0.05 -> 0.01; pass_rate regression_alpha: "
                               "0.05 -> 0.01; pass_rate max_new_failures: 1 -> None; "
                               "error_rate: added at head; critical_tags:")
    assert notes[0].endswith("the stricter of base and head applies until the change is merged")
    assert notes[1] == "suite new is new at head: its gate rules come from head"
    assert notes[2] == ("suite faq is gone at head: its base gate rules still apply until the "
                        "change is merged")


def test_no_base_config_means_head_rules_and_no_notes() -> None:
    head = parse_config(HEAD)
    assert merge_rules(None, head) == (head, [])
    assert merge_rules(head, head) == (head, [])


def test_stricter_rule_and_options_field_by_field() -> None:
    warn = GateRule("m", non_inferiority_margin=0.02, min_detectable=0.1,
                    min_detectable_action="warn")
    fail = GateRule("m", non_inferiority_margin=0.05, min_detectable=0.2)
    both = stricter_rule(warn, fail)
    assert (both.non_inferiority_margin, both.min_detectable, both.min_detectable_action) == (
        0.02, 0.1, "fail")
    assert stricter_rule(warn, GateRule("m")).min_detectable_action == "warn"
    grouped = stricter_options(GateOptions(group_by="lang", group_min_items=8),
                               GateOptions(group_by="category", group_min_items=2,
                                           on_inconclusive="fail"))
    assert (grouped.group_by, grouped.group_min_items, grouped.on_inconclusive) == (
        "lang", 8, "fail")
    assert stricter_options(GateOptions(), GateOptions(group_by="c", group_min_items=3)) \
        .group_min_items == 3


BOT = """\
import json, sys
doc = json.load(open(sys.argv[1]))
broken = set(json.load(open("broken.json")))
json.dump({"output": "wrong" if doc["id"] in broken else doc["input"]}, open(sys.argv[2], "w"))
"""


def make_tree(root: Path, gate: str, broken: list[str]) -> Path:
    rows = [{"id": f"t{i}", "input": f"label{i}", "expected": f"label{i}"} for i in range(8)]
    return write_tickets_tree(root, rows, BOT, gate, {"broken.json": json.dumps(broken)})


@pytest.mark.slow
async def test_gate_trees_applies_base_rules_when_head_deletes_them(tmp_path: Path) -> None:
    base = make_tree(tmp_path / "base", "      pass_rate: {max_new_failures: 0}\n", [])
    head = make_tree(tmp_path / "head", "      pass_rate: {min: 0.1}\n", ["t3", "t7"])
    result = await gate_trees(head, base)
    assert [(o.rule, o.status) for o in result.outcomes] == [
        ("min 0.10", "pass"), ("max_new_failures 0", "regression")]
    assert result.conclusion == "failure"
    assert any("pass_rate min: None -> 0.1; pass_rate max_new_failures: 0 -> None" in n
               for n in result.notes)
    assert result.outcomes[1].reason.endswith(": t3, t7")
