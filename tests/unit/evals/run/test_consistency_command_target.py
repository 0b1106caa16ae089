"""A consistency suite with a command target: the command gets each variant's input and vars."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

BOT = """import json, sys
doc = json.load(open(sys.argv[1]))
options = doc["vars"]["options"]
right = [o["label"] for o in options if o["text"].startswith("right")]
# answers by text at variant 0 and 1, then always the first label: order-dependent
label = right[0] if doc["vars"]["variant"] < 2 else options[0]["label"]
json.dump({"output": "Answer: " + label if doc["id"] != "q2#v3" else "I cannot say"},
          open(sys.argv[2], "w"))
"""
CONFIG = """version: 1
suites:
  - name: quiz
    type: consistency
    dataset: q.csv
    target:
      command: python3 bot.py {input_file} {output_file}
    consistency:
      perturbations: [{type: option_reorder, num_variants: 3}]
    gate:
      original_accuracy: {min: 1.0}
"""


@pytest.mark.slow
def test_a_command_answers_every_variant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from worker.cli.main import main

    (tmp_path / ".llmgate.yml").write_text(CONFIG)
    (tmp_path / "bot.py").write_text(BOT)
    (tmp_path / "q.csv").write_text("id,stem,option_a,option_b,option_c,correct\n"
                                    "q1,One?,right one,wrong,also wrong,A\n"
                                    "q2,Two?,nope,right two,never,B\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REDIS_URL", raising=False)
    code = main(["run", "--format", "json", "--output", str(tmp_path / "r.json")])
    doc = json.loads((tmp_path / "r.json").read_text())
    metrics = doc["metrics"]["quiz"]["head"]
    assert code == 0, capsys.readouterr().err
    assert metrics["original_accuracy"] == 1.0
    assert metrics["unparseable_rate"] == pytest.approx(1 / 8)  # q2#v3 said "I cannot say"
    assert metrics["rc_correct"] < 1.0 and metrics["rc_agree"] < 1.0
