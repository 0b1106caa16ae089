"""A suite with flaky examples and its calibration record (tests of the weights of
worker/evals/verdict/flakiness.py: tests/unit/jobs/test_calibration_weights.py,
tests/unit/cli/test_cli_calibration_file.py).

The suite has 16 examples that passed in each of 5 earlier identical runs and 6 that passed in
3 of them. Head breaks 8 of the stable ones and fixes 4 flaky ones base fails. Unweighted (no
calibration known) that is McNemar's 8 against 4, p = 794/4096 = 0.194: the check passes. With
the record a break of an example that never flipped counts about 3.5 times a flaky one's fix,
the exact sign-flip p-value is 24/4096 = 0.0059 and the check fails.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.unit.cli.test_cli_merge_base import TARGET
from tests.unit.worker_support import OWNER, REPO, commit, git

#: The repository's key in Redis (``owner/repo``).
KEY = f"{OWNER}/{REPO}"
#: Examples that passed in each of the record's 5 runs.
STABLE = [f"s{n}" for n in range(1, 17)]
#: Examples that passed in 3 of the record's 5 runs.
FLAKY = [f"f{n}" for n in range(1, 7)]
#: Echoes its input, but answers "nope" to the inputs in BROKEN.
BOT = TARGET
#: The suite: an exact match, gated on a regression of the pass rate.
CONFIG = """version: 1
settings:
  concurrency: 8
suites:
  - name: tickets
    dataset: evals/t.jsonl
    target:
      command: python3 bot.py {input_file} {output_file}
    assertions:
      - type: equals
    gate:
      pass_rate:
        regression: {alpha: 0.05}
"""
#: The suite's dataset: 16 stable examples, 6 flaky ones.
DATASET = "".join(json.dumps({"id": i, "input": i, "expected": i}) + "\n"
                  for i in STABLE + FLAKY)
#: The calibration record (worker/gate/calibration.py): what the 5 A/A runs showed.
RECORD = {"runs": 5, "comparisons": 4, "false_alarms": 0, "false_alarm_rate": 0.0,
          "alpha": 0.05, "sha": "0" * 40, "finished_at": 1718078400.0,
          "unstable": {"tickets": FLAKY},
          "history": {"tickets": {i: [1.0] * 5 for i in STABLE} | {
              i: [1.0, 0.0, 1.0, 0.0, 1.0] for i in FLAKY}}}


def flaky_repo(dest: Path) -> dict[str, str]:
    """main fails f1-f4; pr/mixed fails s1-s8 and passes every flaky example; pr/again is
    pr/mixed and a README (another head, so the two checks do not share one)."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    shas = {"main": commit(dest, "main", {".llmgate.yml": CONFIG, "evals/t.jsonl": DATASET,
                                          "bot.py": BOT.format(broken=FLAKY[:4])})}
    shas["pr/mixed"] = commit(dest, "pr/mixed", {"bot.py": BOT.format(broken=STABLE[:8])})
    shas["pr/again"] = commit(dest, "pr/again", {"README.md": "again\n"}, start="pr/mixed")
    return shas

