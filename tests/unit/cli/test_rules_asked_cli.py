"""``llmgate run`` on a real git repository with the rules of issue 17: max_example_drop (with
its annotations), max_increase_pct, group floors, critical allowances and order metrics."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.unit.worker_support import commit, git
from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_GATE_FAILED, EXIT_PASS, main

#: The bot answers each example with the score and the token count of its branch's table.
BOT = """import json, sys
TABLE = {table}
example = json.load(open(sys.argv[1]))
score, tokens = TABLE[example["input"]]
json.dump({{"output": str(score), "usage": {{"input": 1, "output": tokens}}}},
          open(sys.argv[2], "w"))
"""
SCORE = "def score(output, context):\n    return float(output)\n"
#: id -> (category, tags); lines 1-6 of the dataset.
ROWS = {"a": ("billing", ["safety"]), "b": ("billing", []), "c": ("billing", ["safety"]),
        "d": ("login", []), "e": ("login", []), "f": ("login", [])}
MAIN = {"a": (0.4, 100), "b": (0.8, 100), "c": (0.9, 100), "d": (0.9, 100), "e": (0.8, 100),
        "f": (0.7, 100)}
GATE = """\
    gate:
      mean_score:
        max_example_drop: {by: 0.05, count: 0}
      tokens_out_mean:
        max_increase_pct: 20
      pass_rate:
        min: 0.5
      min_score:
        min: 0.3
      critical: {tag: safety, max_failures: 1}
      groups: {by: category, min_items: 3}
"""


def config(gate: str) -> str:
    python = shlex.quote(sys.executable)
    return f"""\
version: 1
suites:
  - name: s
    dataset: evals/s.jsonl
    target: {{command: "{python} bot.py {{input_file}} {{output_file}}"}}
    assertions:
      - {{type: python, function: "score.py:score", threshold: 0.5}}
{gate}"""


def dataset() -> str:
    return "".join(json.dumps({"id": i, "input": i, "expected": "x",
                               "metadata": {"category": cat}, "tags": tags}) + "\n"
                   for i, (cat, tags) in ROWS.items())


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """main, and branches that change the bot's table (or the config) as each test needs."""
    root = tmp_path_factory.mktemp("rules") / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, "main", {".llmgate.yml": config(GATE), "evals/s.jsonl": dataset(),
                          "score.py": SCORE, "bot.py": BOT.format(table=MAIN)})
    changes: dict[str, dict[str, Any]] = {
        # every example within 0.05, tokens +10%, critical a still fails (allowed)
        "pr/ok": {**MAIN, "a": (0.4, 110), "b": (0.78, 110), "c": (0.9, 110),
                  "d": (0.9, 110), "e": (0.8, 110), "f": (0.7, 110)},
        # e falls 0.8 -> 0.7 (still passing) and f 0.7 -> 0.4 (now failing)
        "pr/drop": {**MAIN, "e": (0.7, 100), "f": (0.4, 100)},
        # tokens 100 -> 125: +25%
        "pr/tokens": {k: (s, 125) for k, (s, _) in MAIN.items()},
        # login fails 2 of 3 (pass_rate 1/3) while the suite stays at 3/6 = 0.5
        "pr/group": {**MAIN, "d": (0.45, 100), "e": (0.45, 100)},
        # c, the other critical example, fails too: 2 critical failures, 1 allowed
        "pr/critical": {**MAIN, "c": (0.3, 100)},
    }
    for branch, table in changes.items():
        commit(root, branch, {"bot.py": BOT.format(table=table)})
    commit(root, "pr/badrule", {".llmgate.yml": config(GATE.replace(
        "max_increase_pct: 20", "max_increase_pct: -20"))})
    return root


def gate(repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
         head: str) -> tuple[int, dict[str, Any], str]:
    monkeypatch.chdir(repo)
    code = main(["run", "--base", "main", "--head", head, "--format", "json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def outcomes(report: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(o["rule"], o["group"]): o["status"] for o in report["outcomes"]}


@pytest.mark.slow
def test_changes_within_every_rule_pass(repo, capsys, monkeypatch):
    code, report, _ = gate(repo, capsys, monkeypatch, "pr/ok")
    assert (code, report["conclusion"]) == (EXIT_PASS, "success")
    found = outcomes(report)
    assert found[("max_example_drop 0.05 count 0", "")] == "pass"
    assert found[("max_increase_pct 20", "")] == "pass"
    assert found[("critical tag safety max_failures 1", "")] == "pass"
    assert found[("min 0.50", "category=billing")] == "pass"
    assert report["metrics"]["s"]["head"]["tokens_out_mean"] == 110


@pytest.mark.slow
def test_examples_that_dropped_fail_and_are_listed_on_their_lines(repo, capsys, monkeypatch):
    code, report, _ = gate(repo, capsys, monkeypatch, "pr/drop")
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    assert outcomes(report)[("max_example_drop 0.05 count 0", "")] == "regression"
    # f went from pass (0.7) to fail (0.4): it regressed; e still passes but dropped 0.1
    assert [(r["example_id"], r["line"]) for r in report["regressions"]] == [("e", 5),
                                                                             ("f", 6)]
    assert report["regressions"][0]["reason"] == (
        "mean_score fell from 0.8 at base to 0.7 at head, by more than 0.05 "
        "(max_example_drop 0.05 count 0)")


@pytest.mark.slow
def test_tokens_up_by_more_than_the_percent_fail(repo, capsys, monkeypatch):
    code, report, _ = gate(repo, capsys, monkeypatch, "pr/tokens")
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    [failed] = [o for o in report["outcomes"] if o["status"] != "pass" and not o["group"]]
    assert (failed["rule"], failed["group"], failed["reason"]) == (
        "max_increase_pct 20", "", "rose 25.0% from base 100 to 125 (allowed 20%)")


@pytest.mark.slow
def test_a_group_below_its_floor_fails_while_the_suite_holds(repo, capsys, monkeypatch):
    code, report, _ = gate(repo, capsys, monkeypatch, "pr/group")
    assert code == EXIT_GATE_FAILED
    found = outcomes(report)
    assert (found[("min 0.50", "")], found[("min 0.50", "category=login")],
            found[("min 0.50", "category=billing")]) == ("pass", "fail", "pass")
    assert [o["reason"] for o in report["outcomes"] if o["status"] == "fail"] == [
        "0.3333 is below the minimum 0.50"]
    assert report["metrics"]["s"]["head"]["min_score"] == 0.4
    median = report["metrics"]["s"]["head"]["median_score"]
    assert median == pytest.approx((0.45 + 0.7) / 2)


@pytest.mark.slow
def test_critical_failures_over_the_allowance_fail(repo, capsys, monkeypatch):
    code, report, _ = gate(repo, capsys, monkeypatch, "pr/critical")
    assert code == EXIT_GATE_FAILED
    [critical] = [o for o in report["outcomes"] if o["metric"] == "critical examples"]
    assert (critical["status"], critical["reason"]) == (
        "regression", "2 of 2 critical examples do not pass at head (failed or missing; "
                      "allowed 1): a, c")


def test_a_bad_rule_at_head_is_a_config_error_naming_its_line(repo, capsys, monkeypatch):
    monkeypatch.chdir(repo)
    code = main(["run", "--head", "pr/badrule", "--format", "json"])
    _, err = capsys.readouterr()
    line = config(GATE).splitlines().index("        max_increase_pct: 20") + 1
    assert code == EXIT_CONFIG_ERROR
    assert f".llmgate.yml:{line}" in err
    assert "`max_increase_pct` of 'tokens_out_mean' must be a number of percent" in err


#: Custom metrics of the tiny echo repository: each output's length, and the share passed.
CUSTOM = """\
def length(result):
    return None if result["errored"] else len(result["output"])

def share(results):
    return sum(r["passed"] for r in results) / len(results)
"""


@pytest.mark.slow
def test_custom_metrics_gate_through_llmgate_run(tmp_path, capsys, monkeypatch):
    from tests.unit.worker_support import CONFIG, ECHO, build_tiny_repo

    root = tmp_path / "repo"
    build_tiny_repo(root)
    gated = CONFIG.replace("    gate:\n", """\
    metrics:
      - {name: length, type: python, function: "evals/custom.py:length", per_example: true}
      - {name: share, type: python, function: "evals/custom.py:share"}
    gate:
      custom.length:
        max_example_drop: {by: 0.5, count: 0}
      custom.share:
        min: 0.9
""")
    commit(root, "main", {".llmgate.yml": gated, "evals/custom.py": CUSTOM})
    commit(root, "pr/bravo", {"echo.py": ECHO.replace('BROKEN = ""', 'BROKEN = "bravo"')})
    monkeypatch.chdir(root)
    code = main(["run", "--base", "main", "--head", "pr/bravo", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    found = {(o["metric"], o["rule"]): (o["status"], o["reason"]) for o in report["outcomes"]}
    # bravo answers "nope": length 5 -> 4; the share passed 1.0 -> 0.75
    assert found[("custom.length", "max_example_drop 0.5 count 0")] == (
        "regression", "1 examples' custom.length fell by more than 0.5 (allowed 0): "
                      "bravo (5 -> 4)")
    assert found[("custom.share", "min 0.90")] == ("fail", "0.75 is below the minimum 0.90")
    assert report["metrics"]["echo"]["base"]["custom.length"] == (5 + 5 + 7 + 5) / 4
