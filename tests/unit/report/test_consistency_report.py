"""The consistency part of the report: metrics, CAR curves as SVG, inconsistent questions."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from tests.unit.evals.score.consistency_support import results_for
from worker.evals.types import SuiteResult
from worker.report.car_svg import car_svg
from worker.report.consistency import suite_section


def _suite(answers: dict[str, str]) -> SuiteResult:
    return SuiteResult("quiz", "q.jsonl", tuple(results_for(answers)), {})


def test_car_svg_is_well_formed_and_escapes_its_labels() -> None:
    svg = car_svg([("base <x>", [(0.0, 1.0), (1.0, 1.0)]), ("head", [(0.0, 1.0), (1.0, 0.0)])])
    root = ET.fromstring(svg)
    lines = root.findall("{http://www.w3.org/2000/svg}polyline")
    assert [line.get("points") for line in lines] == ["36.0,36.0 284.0,36.0",
                                                     "36.0,36.0 284.0,184.0"]
    assert "base <x>" in "".join(root.itertext()) and "<x>" not in svg


def test_section_lists_the_questions_that_became_inconsistent() -> None:
    base = _suite({"q1": "AAAA", "q2": "AAAA", "q3": "BBBB"})
    head = _suite({"q1": "AABC", "q2": "AAAA", "q3": "BBBA"})
    text = suite_section("quiz", base, head)
    assert "#### Consistency: quiz" in text
    assert "| rc_agree | 1.000 | 0.750 |" in text
    assert "2 questions became inconsistent at head" in text
    assert "**q1**: RC_agree 1.00 → 0.50" in text and "**q3**: RC_agree 1.00 → 0.75" in text
    assert "**q2**" not in text
    assert "| `q1#v2` | option_reorder | Answer:" in text
    assert "<svg" in text and "| MCA(c) head | 1.00 |" in text


def test_unparseable_answers_are_shown_and_a_new_suite_has_no_base() -> None:
    head = SuiteResult("quiz", "q.jsonl", tuple(results_for({"q1": ["A", None, "A", "A"]})), {})
    text = suite_section("quiz", None, head)
    assert "**1 answers at head name no option**" in text and "I cannot tell." in text
    assert "| unparseable_rate | — | 0.250 |" in text
    assert "became inconsistent" not in text
