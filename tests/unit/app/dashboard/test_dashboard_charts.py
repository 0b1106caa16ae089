"""The dashboard's SVG charts (pure): intervals, links and tooltips, gaps, escaping, and the
same bytes for the same points."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from app.dashboard.charts import ChartPoint, number, sparkline, trend_chart
from app.dashboard.model import Flap, flaps, segment
from worker.history_contract import FAILED, PASSED, ExampleRows

SVG = "{http://www.w3.org/2000/svg}"
POINTS = [ChartPoint("aaaaaaa", 0.75, 0.5313, 0.8881, "/d/o/r/runs/a?x=1&y=<2>", "2024-01-01"),
          ChartPoint("<b>é</b>", None, href="/d/o/r/runs/b"),
          ChartPoint("ccccccc", 0.6, 0.4, 0.8, "/d/o/r/runs/c"),
          ChartPoint("ddddddd", 0.65)]


def test_each_point_links_to_its_run_with_its_value_and_interval_as_tooltip():
    svg = trend_chart(POINTS, title="tickets · pass_rate <x>")
    root = ET.fromstring(svg)  # well-formed XML: every text and attribute escaped
    links = root.findall(f".//{SVG}a")
    assert [a.get("href") for a in links] == ["/d/o/r/runs/a?x=1&y=<2>", "/d/o/r/runs/c"]
    assert [a.find(f"{SVG}title").text for a in links] == [
        "aaaaaaa: 0.75 [0.5313, 0.8881] · 2024-01-01", "ccccccc: 0.6 [0.4, 0.8]"]
    whiskers = [a.find(f"{SVG}path").get("d") for a in links]
    assert all(re.fullmatch(r"M[\d.]+ [\d.]+V[\d.]+", d) for d in whiskers)
    [unlinked] = [g for g in root.iter(f"{SVG}g") if g.find(f"{SVG}circle") is not None]
    assert unlinked.find(f"{SVG}title").text == "ddddddd: 0.65"  # no href, no interval
    assert root.find(f"{SVG}title").text == "tickets · pass_rate <x>"
    assert "<b>" not in svg and "&lt;b&gt;é&lt;/b&gt;" not in svg  # the gap's label not shown
    assert "<x>" not in svg


def test_a_gap_breaks_the_line_and_the_band():
    points = [ChartPoint("a", 0.5, 0.4, 0.6), ChartPoint("b", 0.6, 0.5, 0.7),
              ChartPoint("c", None), ChartPoint("d", 0.7, 0.6, 0.8), ChartPoint("e", 0.8, 0.7, 0.9),
              ChartPoint("f", 0.9)]
    svg = trend_chart(points, title="t")
    paths = [p.get("d") for p in ET.fromstring(svg).findall(f"{SVG}path")]
    [band] = [d for d in paths if "Z" in d]
    assert band.count("M") == 2 and band.count("Z") == 2  # a-b and d-e; f has no interval
    [line] = [d for d in paths if d.count("M") == 2 and "Z" not in d]
    assert line.count("L") == 3  # a-b, then d-e-f
    assert svg == trend_chart(list(points), title="t")  # the same points, the same bytes


def test_labels_are_escaped_and_nothing_is_loaded():
    svg = trend_chart([ChartPoint('"><script>x</script>', 1.0, href='javascript:"')],
                      title="<script>")
    ET.fromstring(svg)
    assert "<script" not in svg and "&lt;script&gt;" in svg
    assert "xlink" not in svg and "<image" not in svg and "url(" not in svg


def test_a_sparkline_is_small_and_marks_the_last_value():
    root = ET.fromstring(sparkline([0.1, None, 0.3, 0.5], title="a <b>"))
    assert (root.get("width"), root.get("height")) == ("120", "24")
    assert root.find(f"{SVG}title").text == "a <b>"
    assert root.find(f"{SVG}path").get("d").count("M") == 2
    assert root.find(f"{SVG}circle").get("cx") == "117.0"
    assert ET.fromstring(sparkline([], title="")).find(f"{SVG}path") is None
    assert number(None) == "–" and number(float("nan")) == "–" and number(0.123456) == "0.1235"


def test_flaps_count_status_changes_across_consecutive_runs():
    def run(statuses: dict[str, int]) -> dict[str, ExampleRows]:
        rows = [[k, 1, v] for k, v in statuses.items()]
        return {"base|s": ExampleRows(dataset="", metrics=[], rows=rows),
                "head|s": ExampleRows(dataset="", metrics=[], rows=[["x", 1, FAILED]])}

    got = flaps([run({"a": PASSED, "b": PASSED}), run({"a": FAILED, "b": PASSED}),
                 run({"a": PASSED, "b": FAILED})])
    assert got == [Flap("s", "a", 2, 3, "pass"), Flap("s", "b", 1, 3, "fail")]
    assert segment("a/b ?#") == "a%2Fb%20%3F%23" and segment("..") == "%2E%2E"
