"""``llmgate run --calibration FILE`` weighs the examples as the App's gate weighs them with the
record in Redis (tests/unit/jobs/test_calibration_weights.py; the suite and the record:
tests/unit/calibration_support.py): unweighted the run passes, weighted it fails, and a file
that is not a record is an error (exit 3).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.calibration_support import RECORD, flaky_repo
from tests.unit.worker_support import git
from worker.cli.main import main as llmgate


def test_llmgate_run_takes_the_calibration_file(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    shas = flaky_repo(tmp_path / "flaky")
    repo = tmp_path / "flaky"
    git(repo, "switch", "-q", "pr/mixed")
    record = tmp_path / "cal.json"
    record.write_text(json.dumps(RECORD))
    args = ["run", "--repo", str(repo), "--base", shas["main"], "--no-cache", "--format",
            "json"]
    assert llmgate(args) == 0
    capsys.readouterr()
    assert llmgate([*args, "--calibration", str(record)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert "regression" in json.dumps(report)
    record.write_text("[1, 2]")
    assert llmgate([*args, "--calibration", str(record)]) == 3
