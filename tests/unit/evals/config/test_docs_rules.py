"""The configs of docs/configuration.md's sections on the rules of issue 17 are copy-pasteable:
each YAML block parses, with the rules the text around it says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from worker.evals.config.load import parse_config

PAGE = Path(__file__).resolve().parents[4] / "docs" / "configuration.md"
SECTIONS = ("Per-example score rules", "Percent thresholds", "Rules per group",
            "Critical examples with an allowance", "Order metrics", "Custom metrics from Python")


def blocks(heading: str) -> list[str]:
    text = PAGE.read_text()
    start = text.index(f"## {heading}")
    end = text.find("\n## ", start + 1)
    return re.findall(r"```yaml\n(.*?)```", text[start:end if end > 0 else None], re.S)


@pytest.mark.parametrize("heading", SECTIONS)
def test_every_yaml_block_of_the_section_parses(heading):
    found = blocks(heading)
    assert found
    for block in found:
        assert parse_config(block).suites[0].gate or parse_config(block).suites[0].gate_options


def test_the_documented_rules_are_the_parsed_ones():
    drop = parse_config(blocks("Per-example score rules")[0]).suites[0].gate["mean_score"]
    assert (drop.max_example_drop, drop.max_example_drops) == (0.05, 0)
    pct = parse_config(blocks("Percent thresholds")[0]).suites[0].gate
    assert {m: r.max_increase_pct for m, r in pct.items()} == {
        "latency_p90": 20, "cost_mean": 10, "tokens_out_mean": 25}
    critical = parse_config(blocks("Critical examples with an allowance")[0]).suites[0]
    assert critical.gate_options.critical_max_failures == 1
    custom = parse_config(blocks("Custom metrics from Python")[0]).suites[0]
    assert [(m.name, m.per_example) for m in custom.metrics] == [("brevity", True),
                                                                 ("exact_share", False)]
