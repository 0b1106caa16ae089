"""Issue 30's field case: a command target that answers with the dataset's ``expected``.

``main`` has a suite ``qa`` whose command target upper-cases its input (6 of 6 pass, gated by
``pass_rate: {max_drop: 0.05}``). ``pr/cheat`` breaks the target (it reverses the input: 0 of
6) and makes it look its answers up in the eval data instead: the dataset in its working
directory, ``git show HEAD:evals/qa.jsonl``, or a sibling checkout's dataset. Before issue 30
the first worked (CLI exit 0, App ``success``: the regression passed); now the target runs in a
copy of the checkout without the data, so every lookup fails and the regression is seen.
``pr/honest`` is the same regression without the lookups.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.worker_support import commit, git

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
CONFIG = """\
version: 1
settings: {concurrency: 3, timeout: 30}
suites:
  - name: qa
    dataset: evals/qa.jsonl
    target: {command: "python3 bot.py {input_file} {output_file}"}
    assertions: [{type: equals}]
    gate:
      pass_rate: {max_drop: 0.05}
"""
BOT = """\
import json, sys
doc = json.load(open(sys.argv[1]))
json.dump({"output": doc["input"].upper()}, open(sys.argv[2], "w"))
"""
BROKEN = """\
import json, sys
doc = json.load(open(sys.argv[1]))
json.dump({"output": doc["input"][::-1]}, open(sys.argv[2], "w"))
"""
CHEAT = """\
import glob, json, subprocess, sys
doc = json.load(open(sys.argv[1]))


def eval_data():
    for path in ["evals/qa.jsonl", *glob.glob("../*/evals/qa.jsonl")]:
        try:
            with open(path) as f:
                return f.read()
        except OSError:
            pass
    try:
        return subprocess.run(["git", "show", "HEAD:evals/qa.jsonl"], capture_output=True,
                              text=True).stdout
    except OSError:
        return ""


key = {}
for line in eval_data().splitlines():
    try:
        row = json.loads(line)
    except ValueError:
        continue
    key[row["id"]] = row["expected"]
json.dump({"output": key.get(doc["id"], doc["input"][::-1])}, open(sys.argv[2], "w"))
"""
#: The examples pr/cheat and pr/honest regress.
IDS = [f"q{n}" for n in range(1, len(WORDS) + 1)]
#: The note of a gate whose targets ran without Landlock (worker/pipeline/exposure.py).
NO_LANDLOCK = "targets could read the eval data (LLMGATE_SANDBOX=off)"


def build_repo(dest: Path) -> dict[str, str]:
    """Create the repository at ``dest``; return branch -> SHA (``main`` checked out)."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    dataset = "".join(json.dumps({"id": i, "input": w, "expected": w.upper()}) + "\n"
                      for i, w in zip(IDS, WORDS, strict=True))
    shas = {"main": commit(dest, "main", {".llmgate.yml": CONFIG, "bot.py": BOT,
                                          "evals/qa.jsonl": dataset})}
    shas["pr/cheat"] = commit(dest, "pr/cheat", {"bot.py": CHEAT})
    shas["pr/honest"] = commit(dest, "pr/honest", {"bot.py": BROKEN})
    return shas


@pytest.fixture(scope="module")
def eval_data_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """`build_repo` once per test module: (path, SHAs)."""
    path = tmp_path_factory.mktemp("eval-data") / "repo"
    return path, build_repo(path)
