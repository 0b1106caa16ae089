"""``llmgate run --base main`` gates a branch as the App gates its pull request.

Field case: a branch started before ``main`` fixed three examples. ``llmgate run --base main``
compared the branch with main's tip and failed with 3 false regressions (the fixes the branch
does not have yet), while the App compared the same pull request with the merge base and
passed. Since issue 30 both gate a head that is behind main as merging it would land (the head
merged into main's tip, against the tip): the fixes are in the merge, so still no false
regression, and a branch that breaks again what main fixed after it forked fails (the
comparison with the merge base alone passed it). Through ``llmgate run`` on a real git
repository and the gate job in a real arq worker against the schema-checking fake GitHub.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.unit import worker_support
from tests.unit.worker_support import commit, gate_payload, git
from worker.cli.main import EXIT_GATE_FAILED, EXIT_PASS, EXIT_UNDECIDED, main
from worker.pipeline.plan import CONFLICT_UNDECIDED

github = worker_support.github  # fixture

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
#: The target: echoes its input, but garbles the words in BROKEN.
TARGET = """import json, sys
BROKEN = {broken}
example = json.load(open(sys.argv[1]))
text = example["input"]
json.dump({{"output": "nope" if text in BROKEN else text}}, open(sys.argv[2], "w"))
"""
CONFIG = """version: 1
{settings}suites:
  - name: echo
    dataset: evals/echo.jsonl
    target:
      command: python3 echo.py {{input_file}} {{output_file}}
    assertions:
      - type: equals
    gate:
      pass_rate:
        min: 0.4
        max_drop: 0.05
"""
DATASET = "".join(json.dumps({"id": w, "input": w, "expected": w}) + "\n" for w in WORDS)
FIXED = ["alpha", "bravo", "charlie"]


def build(dest: Path, settings: str = "") -> dict[str, str]:
    """``fork`` (A): 3 of 6 examples broken (0.5). ``feature``: A plus a README change.
    ``main``: A plus the fix of those 3 (1.0), committed after ``feature`` branched."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    shas = {"fork": commit(dest, "main", {
        ".llmgate.yml": CONFIG.format(settings=settings), "evals/echo.jsonl": DATASET,
        "echo.py": TARGET.format(broken=set(FIXED)),
    })}
    shas["feature"] = commit(dest, "feature", {"README.md": "a feature\n"})
    shas["main"] = commit(dest, "main", {"echo.py": TARGET.format(broken="set()")})
    return shas


@pytest.fixture(scope="module")
def moved_on(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("moved") / "repo"
    return repo, build(repo)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["run", *args, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def _regressed(report: dict[str, Any]) -> list[str]:
    return sorted(r["example_id"] for r in report["regressions"])


def test_cli_gates_a_head_behind_main_merged_into_it_like_the_app(moved_on, monkeypatch, capsys):
    repo, shas = moved_on
    monkeypatch.chdir(repo)
    code, report = _run(capsys, "--base", "main", "--head", "feature")
    assert (code, report["conclusion"], _regressed(report)) == (EXIT_PASS, "success", [])
    assert report["base_sha"] == shas["main"]
    merged = git(repo, "rev-parse", f"{report['head_sha']}^1", f"{report['head_sha']}^2")
    assert merged.split() == [shas["main"], shas["feature"]]  # the merge commit's two parents
    assert f"the head {shas['feature'][:7]} is behind the base branch: gated as merging it " \
           f"would land, {report['head_sha'][:7]} ({shas['feature'][:7]} merged into the tip " \
           f"{shas['main'][:7]}), against the tip" in " ".join(report["notes"])


def test_cli_base_tip_compares_with_the_tip_and_finds_the_3_differences(moved_on, monkeypatch,
                                                                        capsys):
    repo, shas = moved_on
    monkeypatch.chdir(repo)
    code, report = _run(capsys, "--base", "main", "--head", "feature", "--base-tip")
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    assert _regressed(report) == FIXED  # exactly the 3 examples main fixed
    assert report["base_sha"] == shas["main"]


def test_cli_working_tree_head_is_merged_too(moved_on, tmp_path, monkeypatch, capsys):
    repo, shas = moved_on
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-local", str(repo), str(clone)], check=True)
    git(clone, "switch", "-q", "-c", "feature", "origin/feature")
    git(clone, "branch", "-q", "-f", "main", "origin/main")
    monkeypatch.chdir(clone)
    code, report = _run(capsys, "--base", "main")
    assert (code, _regressed(report), report["base_sha"]) == (EXIT_PASS, [], shas["main"])
    assert git(clone, "status", "--porcelain") == ""  # the user's tree and refs are untouched
    assert git(clone, "rev-parse", "HEAD").strip() == shas["feature"]
    # an untracked file is in no commit, so in no pull request: still merged (a CI job's own
    # cache folder in the checkout made it compare with the merge base, fresh user of issue 30)
    (clone / ".llmgate-ci").mkdir()
    (clone / ".llmgate-ci" / "responses.sqlite3").write_text("x\n")
    code, report = _run(capsys, "--base", "main")
    assert (code, _regressed(report), report["base_sha"]) == (EXIT_PASS, [], shas["main"])
    (clone / "README.md").write_text("changed, not committed\n")  # a merge holds commits only
    code, report = _run(capsys, "--base", "main")
    assert (code, _regressed(report), report["base_sha"]) == (EXIT_PASS, [], shas["fork"])
    assert "the working tree has changes not committed" in " ".join(report["notes"])


def test_cli_honours_settings_base_tip(tmp_path, monkeypatch, capsys):
    shas = build(tmp_path / "tip", settings="settings:\n  base: tip\n")
    monkeypatch.chdir(tmp_path / "tip")
    code, report = _run(capsys, "--base", "main", "--head", "feature")
    assert (code, _regressed(report), report["base_sha"]) == (EXIT_GATE_FAILED, FIXED,
                                                              shas["main"])
    assert "as settings.base: tip says" in " ".join(report["notes"])


def old_fork_point(dest: Path, old_config: str | None) -> dict[str, str]:
    """Case from the field (tester, issue 12, H1): ``pr`` branches from an old commit of main
    (``old_config`` there: none, or weaker rules) and regresses 3 of 6 examples; main's tip
    has the strict config (and, in the second case, ``settings.base: tip``)."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    files = {"evals/echo.jsonl": DATASET, "echo.py": TARGET.format(broken="set()")}
    if old_config is not None:
        files[".llmgate.yml"] = old_config
    shas = {"old": commit(dest, "main", files)}
    shas["pr"] = commit(dest, "pr", {"echo.py": TARGET.format(broken=set(FIXED))})
    strict = CONFIG.format(settings="").replace("min: 0.4", "min: 0.8")
    shas["main"] = commit(dest, "main", {".llmgate.yml": strict})
    return shas


@pytest.mark.parametrize("old_config", [None, CONFIG.format(settings="").replace(
    "        max_drop: 0.05\n", "")])
def test_a_pull_request_cannot_choose_its_gate_by_its_fork_point(tmp_path, monkeypatch, capsys,
                                                                 old_config):
    shas = old_fork_point(tmp_path / "repo", old_config)
    monkeypatch.chdir(tmp_path / "repo")
    code, report = _run(capsys, "--base", "main", "--head", "pr")
    # before: neutral "no llmgate config", exit 0 (no config), or success (weaker rules); then a
    # config error (no config at head). Now the merge brings main's strict config and fixes in.
    assert (code, report["conclusion"], _regressed(report), report["base_sha"]) == (
        EXIT_GATE_FAILED, "failure", FIXED, shas["main"])
    assert "gated as merging it would land" in " ".join(report["notes"])


async def test_the_app_compares_the_same_pull_request_with_the_same_base(github, moved_on):
    repo, shas = moved_on
    await worker_support.run_jobs([gate_payload(str(repo), shas["feature"], shas["main"])])
    state = github.state()
    [run] = state["check_runs"]
    assert (run["conclusion"], run["annotations"]) == ("success", [])
    assert f"**base** `{shas['main'][:7]}`" in run["output"]["summary"]
    assert run["head_sha"] == shas["feature"]  # the check is the head's, whatever was gated


@pytest.mark.parametrize("old_config", [None, CONFIG.format(settings="").replace(
    "        max_drop: 0.05\n", "")])
async def test_the_app_gates_an_old_fork_point_by_the_base_branch_tip(github, tmp_path,
                                                                      old_config):
    repo = tmp_path / "repo"
    shas = old_fork_point(repo, old_config)
    await worker_support.run_jobs([gate_payload(str(repo), shas["pr"], shas["main"])])
    [run] = github.state()["check_runs"]
    assert run["conclusion"] == "failure"
    assert f"**base** `{shas['main'][:7]}`" in run["output"]["summary"]
    regressed = [a["start_line"] for a in run["annotations"]
                 if a["path"] == "evals/echo.jsonl" and "regressed" in a["title"]]
    assert regressed == [1, 2, 3]  # alpha, bravo, charlie: the lines of the examples main fixed


#: The target of the re-break case: garbles the words listed in broken.json and, when the file
#: exists, more_broken.json.
LISTED = """import json, os, sys
BROKEN = set(json.load(open("broken.json")))
if os.path.exists("more_broken.json"):
    BROKEN |= set(json.load(open("more_broken.json")))
if os.path.exists("broken.txt"):
    BROKEN |= {l for l in open("broken.txt").read().split() if l.isalpha()}
example = json.load(open(sys.argv[1]))
text = example["input"]
json.dump({"output": "nope" if text in BROKEN else text}, open(sys.argv[2], "w"))
"""


def rebreak(dest: Path) -> dict[str, str]:
    """Case from the field (fresh-user hour of issue 30): ``pr`` forks from ``fork``, where 3 of
    6 examples fail; main then fixes them (``broken.json`` emptied) and ``pr`` breaks the same 3
    again in a file main never touched (``more_broken.json``). Against the merge base ``pr``
    changes nothing (0.5 -> 0.5: it passed); merged, it takes main from 1.0 to 0.5."""
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    shas = {"fork": commit(dest, "main", {
        ".llmgate.yml": CONFIG.format(settings="").replace("python3 echo.py", "python3 listed.py"),
        "evals/echo.jsonl": DATASET, "listed.py": LISTED, "broken.json": json.dumps(FIXED)})}
    shas["pr"] = commit(dest, "pr", {"more_broken.json": json.dumps(FIXED)})
    shas["main"] = commit(dest, "main", {"broken.json": "[]"})
    return shas


def test_a_branch_that_breaks_again_what_main_fixed_fails(tmp_path, monkeypatch, capsys):
    shas = rebreak(tmp_path / "repo")
    monkeypatch.chdir(tmp_path / "repo")
    code, report = _run(capsys, "--base", "main", "--head", "pr")
    assert (code, report["conclusion"], _regressed(report), report["base_sha"]) == (
        EXIT_GATE_FAILED, "failure", FIXED, shas["main"])  # before: exit 0, success
    assert "gated as merging it would land" in " ".join(report["notes"])


async def test_the_app_fails_a_branch_that_breaks_again_what_main_fixed(github, tmp_path):
    repo = tmp_path / "repo"
    shas = rebreak(repo)
    await worker_support.run_jobs([gate_payload(str(repo), shas["pr"], shas["main"])])
    [run] = github.state()["check_runs"]
    assert (run["head_sha"], run["conclusion"]) == (shas["pr"], "failure")  # before: success
    assert f"**base** `{shas['main'][:7]}`" in run["output"]["summary"]
    assert "gated as merging it would land" in run["output"]["summary"]


def test_a_head_that_conflicts_with_main_is_compared_itself_and_never_passes(
        tmp_path, monkeypatch, capsys):
    """main and the branch rewrite the same line: no merge exists, GitHub refuses to merge,
    and the head itself is compared with the merge base (noted). It can fail there but not
    pass: a later push to main that removes the conflict would leave that pass on a merge
    nobody gated (fresh user of issue 30), so the run is undecided."""
    repo = tmp_path / "repo"
    shas = build(repo)
    shas["clash"] = commit(repo, "clash", {"echo.py": TARGET.format(broken="{'alpha'}")},
                           start=shas["fork"])  # fixes bravo and charlie against the fork
    monkeypatch.chdir(repo)
    code, report = _run(capsys, "--base", "main", "--head", "clash")
    assert (code, report["conclusion"], report["base_sha"], report["head_sha"]) == (
        EXIT_UNDECIDED, "action_required", shas["fork"], shas["clash"])
    assert report["headline"] == f"undecided: {CONFLICT_UNDECIDED}"
    assert f"the head conflicts with the base branch's tip {shas['main'][:7]}" in \
        " ".join(report["notes"])
    shas["worse"] = commit(repo, "worse", {"echo.py": TARGET.format(
        broken="{'alpha', 'bravo', 'charlie', 'delta'}")}, start=shas["fork"])
    code, report = _run(capsys, "--base", "main", "--head", "worse")  # a regression fails
    assert (code, report["conclusion"], _regressed(report)) == (EXIT_GATE_FAILED, "failure",
                                                                ["delta"])


def test_the_merge_ignores_the_attributes_of_what_is_checked_out(tmp_path, monkeypatch, capsys):
    """Fresh user of issue 30: in a CI job the checkout is GitHub's merge ref, so a pull
    request's ``.gitattributes`` (``-merge``) made llmgate's merge of a clean pair conflict, and
    the head was compared with its merge base: the re-break passed (exit 0)."""
    repo = tmp_path / "repo"
    shas = rebreak(repo)
    spacer = "".join(f"# spacer {n}\n" for n in range(6))
    shas["fork2"] = commit(repo, "main", {"broken.txt": "alpha\nbravo\ncharlie\n" + spacer})
    shas["pr2"] = commit(repo, "pr2", {
        "broken.txt": "alpha\nbravo\ncharlie\n" + spacer + "alpha\nbravo\ncharlie\n",
        ".gitattributes": "broken.txt -merge\n"}, start=shas["fork2"])
    shas["main2"] = commit(repo, "main", {"broken.txt": spacer})  # main fixes the 3
    git(repo, "switch", "-q", "--detach", shas["main2"])
    git(repo, "merge", "-q", "--no-edit", shas["pr2"])  # what refs/pull/N/merge holds
    monkeypatch.chdir(repo)
    code, report = _run(capsys, "--base", shas["main2"], "--head", shas["pr2"])
    assert (code, report["conclusion"], _regressed(report)) == (EXIT_GATE_FAILED, "failure",
                                                                FIXED)  # before: exit 0
    assert "gated as merging it would land" in " ".join(report["notes"])
