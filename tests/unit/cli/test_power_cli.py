"""``llmgate power``: examples needed for a drop, from a flip rate or a calibration record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worker.cli.main import main
from worker.evals.verdict import power


def test_power_from_a_given_flip_rate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["power", "--n", "300", "--drop", "0.05", "--flip-rate", "0.05"]) == 0
    out = capsys.readouterr().out
    assert f"detects drops >= {power.mdd_binary(300, 0.05, 0.05):.3f}" in out
    assert f"about {power.n_needed_binary(0.05, 0.05, 0.05)} paired examples" in out
    assert "about 369 paired examples" in out


def test_power_from_the_suites_measured_noise(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    record = {"runs": 5, "flip_rates": {"tickets": {"t1": 0.5, "t2": 0.25, "t3": 0.25}}}
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    assert main(["power", "--n", "300", "--calibration", str(path), "--examples", "20",
                 "--tests", "10"]) == 0
    out = capsys.readouterr().out
    assert "noise: 0.0250 flips per direction (measured: 3 of 20 examples flipped" in out
    assert f"about {power.n_needed_binary(0.05, 0.025, 0.005)} paired examples" in out


def test_power_refuses_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["power", "--n", "300"]) == 2
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    assert main(["power", "--n", "300", "--calibration", str(tmp_path / "bad.json")]) == 2
    assert main(["power", "--n", "0", "--flip-rate", "0.05"]) == 2
    assert "cannot read the calibration" in capsys.readouterr().err
