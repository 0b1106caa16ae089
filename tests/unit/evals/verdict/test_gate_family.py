"""The sign-flip family in the gate: settings from base, primary metrics, weights, repeats."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from worker.baselines.keys import suite_key
from worker.errors import ConfigError
from worker.evals.config.load import parse_config
from worker.evals.types import CommandTarget, GateOptions, GateRule, StatisticsSettings, SuiteConfig
from worker.evals.verdict.comparison import paired_verdicts
from worker.evals.verdict.paired import PairedSuite
from worker.evals.verdict.rules import merge_rules
from worker.evals.verdict.signflip import FamilySuite, alpha_shares, family_p_values, split_note

CONFIG = """version: 1
settings:
  statistics: {method: signflip, primary_share: 0.9, group_share: 0.25, draws: 500,
               confirm_flips: 0.2}
  sequential: {looks: 3, spending: pocock}
suites:
  - name: s
    dataset: s.jsonl
    target: {command: "x {input_file} {output_file}"}
    gate:
      pass_rate: {regression: {alpha: 0.05}, primary: true}
      error_rate: {regression: {alpha: 0.05}}
"""


def test_statistics_settings_and_primary_are_parsed() -> None:
    config = parse_config(CONFIG)
    assert config.settings.statistics == StatisticsSettings(
        "signflip", 0.9, 0.25, 500, 0.2, True, 3, "pocock")
    assert config.suites[0].gate["pass_rate"].primary
    assert not config.suites[0].gate["error_rate"].primary
    assert parse_config(CONFIG.replace("  sequential: {looks: 3, spending: pocock}\n",
                                       "  sequential: true\n")).settings.statistics.looks == 4


@pytest.mark.parametrize(("old", "new", "message"), [
    ("method: signflip", "method: bonferroni", "must be one of signflip, holm"),
    ("draws: 500", "draws: 5", "integer from 100 to 100000"),
    ("looks: 3", "looks: 1", "integer from 2 to 10"),
    ("{regression: {alpha: 0.05}, primary: true}", "{min: 0.5, primary: true}",
     "has no `regression` rule"),
    ("primary: true", "primary: yes please", "must be true or false"),
])
def test_bad_statistics_settings_fail_at_their_line(old: str, new: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        parse_config(CONFIG.replace(old, new))
    assert err.value.line is not None


def test_statistics_and_primary_come_from_base() -> None:
    base = parse_config(CONFIG)
    head = parse_config(CONFIG.replace("method: signflip", "method: holm").replace(
        "primary: true", "primary: false"))
    merged, notes = merge_rules(base, head)
    assert merged.settings.statistics == base.settings.statistics
    assert merged.suites[0].gate["pass_rate"].primary
    assert any("settings.statistics" in note for note in notes)


def suite(primary: bool = False, groups: bool = True) -> SuiteConfig:
    rules = {m: GateRule(m, regression_alpha=0.05, primary=primary and m == "pass_rate")
             for m in ("pass_rate", "error_rate")}
    options = GateOptions(group_by="category", group_min_items=5) if groups else GateOptions()
    return SuiteConfig("s", "s.jsonl", CommandTarget("x"), (), rules, gate_options=options)


def paired(base: np.ndarray, head: np.ndarray, groups: bool = True) -> PairedSuite:
    n = base.shape[0]
    labels = tuple(f"category=g{i % 2}" for i in range(n)) if groups else ("",) * n
    return PairedSuite(tuple(f"e{i}" for i in range(n)), ("pass_rate", "error_rate"),
                       base, head, labels, (), ())


def test_alpha_is_split_by_primary_then_between_suite_and_groups() -> None:
    values = paired(np.ones((20, 2, 1)), np.ones((20, 2, 1)))
    options = StatisticsSettings(primary_share=0.8, group_share=0.5)
    shares = alpha_shares([FamilySuite("s", values, suite(True).gate, 5)], options)
    assert shares[("s", "pass_rate", "")] == pytest.approx(0.4)
    assert shares[("s", "pass_rate", "category=g0")] == pytest.approx(0.2)
    assert shares[("s", "error_rate", "")] == pytest.approx(0.1)
    assert sum(shares.values()) == pytest.approx(1.0)


def test_the_report_says_in_words_how_alpha_was_split() -> None:
    """Field case (tester, issue 15): the report named no primary_share or group_share; every
    row showed only its own alpha."""
    values = paired(np.ones((20, 2, 1)), np.ones((20, 2, 1)))
    options = StatisticsSettings(primary_share=0.8, group_share=0.5)
    note = split_note([FamilySuite("s", values, suite(True).gate, 5)], options)
    assert note == (
        "How alpha was split (settings.statistics): primary_share 0.8 of alpha went to the "
        "metrics marked primary: true (s pass_rate) and the rest to the other 1 (s error_rate); "
        "within a metric, "
        "group_share 0.5 of its part went to its group tests (evenly) and the rest to its "
        "whole-suite test. Each test starts at alpha × its share (s pass_rate 0.4 + 2 groups × "
        "0.2; s error_rate 0.1 + 2 groups × 0.05); a rejected test passes its share on to the "
        "rest (Bretz et al. 2009).")
    flat = paired(np.ones((20, 2, 1)), np.ones((20, 2, 1)), False)
    alone = split_note([FamilySuite("s", flat, suite(groups=False).gate, 5)],
                       StatisticsSettings())
    assert alone.startswith("How alpha was split (settings.statistics): alpha was split evenly "
                            "over the 2 tested metrics. Each test starts at alpha × its share "
                            "(s pass_rate 0.5; s error_rate 0.5)")
    rules = dict(suite(groups=False).gate)
    rules["error_rate"] = replace(rules["error_rate"], regression_alpha=0.01)
    mixed = split_note([FamilySuite("s", flat, rules, 5)], StatisticsSettings())
    assert "Each test starts at its rule's regression alpha × its share" in mixed


def test_a_primary_metric_reaches_significance_that_an_equal_split_misses() -> None:
    base = np.zeros((40, 2, 1))
    base[:, 0, 0] = 1.0
    base[20:34, 1, 0] = [1.0] * 7 + [0.0] * 7
    head = base.copy()
    head[:5, 0, 0] = 0.0  # 5 broken: p = 1/32 alone
    head[20:34, 1, 0] = 1.0 - base[20:34, 1, 0]  # 14 balanced flips of error_rate
    equal = paired_verdicts([(suite(groups=False), paired(base, head, False))],
                            options=StatisticsSettings(draws=60000))  # 2**16: SE 0.001
    primary = paired_verdicts([(suite(True, False), paired(base, head, False))],
                              options=StatisticsSettings(primary_share=0.9))
    # exactly 1 - (31/32)(1 - P(p_error <= 1/32)) = 0.059 > 0.05 (with 20 balanced flips it
    # was 0.0513); 2048 sign patterns (SE 0.005) could put either on either side of 0.05
    assert equal[0] == "success"  # error_rate holds half of alpha
    assert primary[0] == "failure"  # about 1/32 + 1/288 <= 0.05
    (first, *_) = primary[2]
    # 19 discordant examples: 2048 random sign patterns, so p is near 1/32, not exact
    assert first.p_family == pytest.approx(2.0 ** -5, abs=0.01)
    assert first.adjustment == "sign-flip min-P" and first.p_family <= first.p_adjusted < 0.05


def test_history_weights_make_a_break_of_stable_examples_count() -> None:
    """8 stable examples break and 8 flaky ones flip back: unweighted it is a wash."""
    base = np.zeros((40, 2, 1))
    base[:16, 0, 0] = [1.0] * 8 + [0.0] * 8
    head = base.copy()
    head[:16, 0, 0] = [0.0] * 8 + [1.0] * 8
    stable, flaky = [1.0] * 5, [1.0, 0.0, 1.0, 0.0, 0.0]
    runs = [stable] * 8 + [flaky] * 8 + [[0.0] * 5] * 24  # most examples never pass
    history = {"s": {"pass_rate": {f"e{i}": runs[i] for i in range(40)},
                     "error_rate": {f"e{i}": [0.0] * 5 for i in range(40)}}}
    config = suite(groups=False)
    values = paired(base, head, False)
    plain = family_p_values([FamilySuite("s", values, config.gate, 5)], StatisticsSettings())
    weighted = family_p_values([FamilySuite("s", values, config.gate, 5, history["s"])],
                               StatisticsSettings())
    assert plain[("s", "pass_rate", "")][0] > 0.5
    assert weighted[("s", "pass_rate", "")][0] < 0.03


def test_identical_repeats_do_not_shrink_the_evidence() -> None:
    """A peer's fault: 3 repeats of one answer gave a zero-width CI and 'significant'."""
    base = np.zeros((3, 2, 3))
    base[:, 0, :] = 1.0
    head = np.zeros((3, 2, 3))  # all 3 examples fail at head, 3 identical repeats each
    conclusion, outcomes, found = paired_verdicts([(suite(groups=False),
                                                    paired(base, head, False))],
                                                  options=StatisticsSettings())
    assert found[0].p_family == 2.0 ** -3  # three examples, not nine draws
    assert conclusion == "success" and outcomes[0].status == "pass"


def test_statistics_settings_do_not_change_the_baseline_key(tmp_path: Path) -> None:
    """How results are compared never changes a base run: stored baselines stay reusable."""
    (tmp_path / "s.jsonl").write_text('{"id": "a", "input": "x"}\n', encoding="utf-8")
    config = parse_config(CONFIG)
    holm = replace(config, settings=replace(config.settings,
                                            statistics=StatisticsSettings(method="holm")))
    repeats = replace(config, settings=replace(config.settings, repeats=2))
    key = suite_key(config, config.suites[0], tmp_path)
    assert suite_key(holm, holm.suites[0], tmp_path) == key
    assert suite_key(repeats, repeats.suites[0], tmp_path) != key
