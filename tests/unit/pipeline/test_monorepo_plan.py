"""Several configs: the config keys, which configs a change gates, how a folder's config runs,
and the rendering of several reports (real directories and real target commands, no GitHub).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.unit.monorepo_support import root_config, service_files
from tests.unit.worker_support import CONFIG, DATASET
from worker.contract import COMMENT_MARKER
from worker.errors import ConfigError
from worker.evals.config.layout import MAX_CONFIGS
from worker.evals.config.load import parse_config
from worker.evals.types import ConfigRef, GateReport, Regression
from worker.pipeline.multi import gate_plan
from worker.pipeline.plan import discover, plan_configs
from worker.pipeline.report_values import ConfigReport, MultiReport
from worker.report import multi as report_multi
from worker.report.render import COMMENT_MAX_BYTES


def write(root: Path, files: dict[str, str | None]) -> Path:
    for name, text in files.items():
        if text is not None:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
    return root


def two_services(root: Path, *, root_text: str | None = None, broken: str = "") -> Path:
    write(root, {**service_files("services/a", broken), **service_files("services/b")})
    return write(root, {".llmgate.yml": root_text if root_text is not None else root_config()})


# --- the config keys -------------------------------------------------------------------


def test_a_root_config_may_list_configs_without_suites() -> None:
    config = parse_config(root_config("per_config"))
    assert config.suites == () and config.settings.checks == "per_config"
    assert config.configs == (ConfigRef("services/a/.llmgate.yml", 5),
                              ConfigRef("services/b/.llmgate.yml", 6))
    assert (config.discover, config.layout_line) == (False, 4)
    assert parse_config("version: 1\ndiscover: true\n").discover is True


@pytest.mark.parametrize(("text", "line", "message"), [
    ("configs: [services/a, services/./a]", 1,
     "`configs`: services/a/.llmgate.yml is listed twice (first at line 2)"),
    ("configs:\n  - /etc", 2, "`configs`: '/etc' must be a relative POSIX path inside the "
                              "repository"),
    ("configs:\n  - a/../..", 2, "`configs`: 'a/../..' must be a relative POSIX path inside "
                                 "the repository"),
    ("configs:\n  - a/gate.yml", 2, "`configs`: 'a/gate.yml': a listed config must be named "
                                    ".llmgate.yml (list its folder)"),
    ("configs:\n  - .", 2, "`configs`: the root .llmgate.yml is gated by itself when it has "
                           "suites; list only configs in folders"),
    ("configs: []", 1, "`configs` is empty: list folders holding a .llmgate.yml, or remove "
                       "the key"),
    ("configs: services/a", 1, "`configs` must be a list of folders, e.g. [services/a]"),
    ("discover: yes please", 1, "`discover` must be true or false"),
    ("settings: {checks: each}\nconfigs: [a]", 1,
     "`checks` must be one of combined, per_config, got 'each'"),
    ("discover: false", 0, "the config is missing `suites`"),
])
def test_bad_layout_keys_are_config_errors_on_their_line(text: str, line: int,
                                                          message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(f"version: 1\n{text}\n")
    assert (caught.value.line, caught.value.message) == (line + 1, message)


def test_too_many_listed_configs() -> None:
    entries = "".join(f"  - s{i}\n" for i in range(MAX_CONFIGS + 1))
    with pytest.raises(ConfigError, match=f"may list at most {MAX_CONFIGS} configs"):
        parse_config(f"version: 1\nconfigs:\n{entries}")


# --- which configs a change gates ------------------------------------------------------


def test_base_list_and_configs_new_at_head_are_united_base_first(tmp_path: Path) -> None:
    base = two_services(tmp_path / "base")
    head = two_services(tmp_path / "head", root_text=root_config(extra="  - services/c\n")
                        .replace("  - services/a\n", ""))
    write(head, service_files("services/c"))
    plan = plan_configs(head, base)
    assert [(c.path, c.at_head, c.at_base) for c in plan.configs] == [
        ("services/a/.llmgate.yml", True, True), ("services/b/.llmgate.yml", True, True),
        ("services/c/.llmgate.yml", True, False)]
    assert plan.checks == "combined" and plan.notes == ()


def test_a_head_entry_naming_no_file_is_an_error_on_the_root_config(tmp_path: Path) -> None:
    base = two_services(tmp_path / "base")
    head = two_services(tmp_path / "head", root_text=root_config(extra="  - services/z\n"))
    (head / "services/b/.llmgate.yml").unlink()
    (head / "services/b/.llmgate.yml").symlink_to(head / "services/a/.llmgate.yml")
    [root, a, b] = plan_configs(head, base).configs
    assert (root.path, root.error.path, root.error.line, root.error.message) == (
        ".llmgate.yml", ".llmgate.yml", 6,
        "`configs`: services/b/.llmgate.yml is not a regular file of this commit")
    assert (a.at_head, b.at_head, b.at_base) == (True, False, True)  # b: deleted at head


def test_checks_mode_comes_from_the_base(tmp_path: Path) -> None:
    base = two_services(tmp_path / "base", root_text=root_config("per_config"))
    head = two_services(tmp_path / "head")
    assert plan_configs(head, base).checks == "per_config"
    assert plan_configs(base, head).checks == "combined"


def test_discovery_skips_hidden_vendored_and_symlinked_configs(tmp_path: Path) -> None:
    root = write(tmp_path, {f"{d}/.llmgate.yml": CONFIG for d in (
        "b", "a/deep", ".github", "node_modules/x", "vendor/y", "third_party/z")})
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked/.llmgate.yml").symlink_to(tmp_path / "b/.llmgate.yml")
    (tmp_path / "alias").symlink_to(tmp_path / "b", target_is_directory=True)
    found, notes = discover(root)
    assert found == ["a/deep/.llmgate.yml", "b/.llmgate.yml"]
    assert notes == ("'linked/.llmgate.yml' is not gated: a config must be a regular file with "
                     "a plain path of at most 200 characters",)


def test_discovery_is_bounded(tmp_path: Path) -> None:
    write(tmp_path, {f"s{i}/.llmgate.yml": CONFIG for i in range(MAX_CONFIGS + 1)})
    with pytest.raises(ConfigError, match=f"{MAX_CONFIGS + 1} .llmgate.yml files found"):
        discover(tmp_path)
    [root] = plan_configs(tmp_path, None).configs
    assert (root.path, root.error.path, root.error.line) == (".llmgate.yml", ".llmgate.yml",
                                                              None)


def test_a_single_root_config_is_planned_as_before(tmp_path: Path) -> None:
    write(tmp_path / "base", {".llmgate.yml": CONFIG})
    plan = plan_configs(write(tmp_path / "head", {".llmgate.yml": CONFIG}), tmp_path / "base")
    assert [c.path for c in plan.configs] == [".llmgate.yml"] and not plan.several
    empty = plan_configs(write(tmp_path / "none", {"README": "x"}), None)
    assert [(c.path, c.error) for c in empty.configs] == [(".llmgate.yml", None)]


# --- how a folder's config runs --------------------------------------------------------


async def test_a_folder_config_runs_in_its_folder_with_repository_paths(tmp_path: Path) -> None:
    base = two_services(tmp_path / "base")
    head = two_services(tmp_path / "head", broken="charlie")
    lines = DATASET.splitlines()
    lines[3] = '{"id": "delta", "input": '  # services/b's dataset: line 4 cut short
    (head / "services/b/evals/echo.jsonl").write_text("\n".join(lines) + "\n")
    multi = await gate_plan(plan_configs(head, base), head, base)
    a, b = (c.report for c in multi.configs)
    assert [(r.dataset, r.line, r.example_id) for r in a.regressions] == [
        ("services/a/evals/echo.jsonl", 3, "charlie")]
    assert a.head.suites["echo"].dataset == "services/a/evals/echo.jsonl"
    assert (b.config_error.path, b.config_error.line) == ("services/b/evals/echo.jsonl", 4)
    assert multi.conclusion == "failure"
    merged = multi.merged()
    assert [o.suite for o in merged.outcomes] == ["services/a: echo", "services/a: echo"]
    assert merged.config_error is b.config_error


async def test_on_paths_are_relative_to_the_config_folder(tmp_path: Path) -> None:
    # code anywhere runs a command target's suite unless a `!` glob leaves it out
    gated = CONFIG.replace("    target:", '    on_paths: ["prompts/**", "../../shared/**", '
                                          '"!../b/**"]\n    target:')
    for side in ("base", "head"):
        two_services(tmp_path / side)
        write(tmp_path / side, {"services/a/.llmgate.yml": gated})
    plan = plan_configs(tmp_path / "head", tmp_path / "base")

    async def statuses(changed: list[str]) -> str:
        multi = await gate_plan(plan, tmp_path / "head", tmp_path / "base",
                                changed_files=changed)
        return multi.configs[0].report.conclusion + ":" + ",".join(
            multi.configs[0].report.head.suites) if multi.configs[0].report.head else ""

    assert await statuses(["services/b/echo.py"]) == "success:"  # skipped: nothing ran
    assert await statuses(["services/a/prompts/p.txt"]) == "success:echo"
    assert await statuses(["shared/lib.py"]) == "success:echo"
    assert await statuses(["prompts/p.txt"]) == "success:"  # the root's prompts: not a's
    assert await statuses(["services/c/echo.py"]) == "success:echo"  # code, not excluded


async def test_only_the_root_config_lists_configs(tmp_path: Path) -> None:
    base = two_services(tmp_path / "base")
    head = two_services(tmp_path / "head")
    write(head, {"services/b/.llmgate.yml": CONFIG.replace(
        "settings:\n", "configs: [x]\nsettings:\n  checks: per_config\n")})
    multi = await gate_plan(plan_configs(head, base), head, base)
    err = multi.configs[1].report.config_error
    assert (err.path, err.line, err.message) == (
        "services/b/.llmgate.yml", 2, "only the repository's root .llmgate.yml may list or "
        "discover configs: remove `configs`/`discover` here")
    write(head, {"services/b/.llmgate.yml": CONFIG.replace("settings:\n",
                                                           "settings:\n  checks: per_config\n")})
    multi = await gate_plan(plan_configs(head, base), head, base)
    assert multi.configs[1].report.notes[0] == ("services/b/.llmgate.yml: settings.checks "
                                                "ignored: only the root .llmgate.yml decides it")


async def test_a_symlinked_service_folder_at_head_is_not_followed(tmp_path: Path) -> None:
    base = two_services(tmp_path / "base")
    head = two_services(tmp_path / "head")
    outside = write(tmp_path / "outside", service_files("x"))
    os.rename(head / "services/b", tmp_path / "gone")
    (head / "services/b").symlink_to(outside / "x", target_is_directory=True)
    multi = await gate_plan(plan_configs(head, base), head, base)
    reports = {c.path: c.report for c in multi.configs}
    assert reports[".llmgate.yml"].config_error.message == (
        "`configs`: services/b/.llmgate.yml is not a regular file of this commit")
    b = reports["services/b/.llmgate.yml"]
    assert (b.conclusion, b.headline) == ("failure", "services/b/.llmgate.yml was deleted at head")
    assert b.head is None  # nothing of the outside folder ran


# --- rendering -------------------------------------------------------------------------


def _big_report(suite: str, regressions: int) -> GateReport:
    worse = tuple(Regression(suite, "evals/x.jsonl", i + 1, f"id{i}", "e" * 300, "b" * 300,
                             "h" * 300, "r" * 200) for i in range(regressions))
    return GateReport("failure", (), worse, None, None)


def test_many_large_configs_fit_one_comment_and_each_is_named() -> None:
    configs = tuple(ConfigReport(f"s{i}/.llmgate.yml", f"s{i}", _big_report(f"suite{i}", 60))
                    for i in range(40))
    small = ConfigReport("tiny/.llmgate.yml", "tiny", GateReport("success", (), (), None, None))
    multi = MultiReport((small, *configs), "per_config")
    body = report_multi.comment_body(multi, head_sha="a" * 40, base_sha="b" * 40)
    assert len(body.encode()) <= COMMENT_MAX_BYTES and body.startswith(COMMENT_MARKER + "\n")
    assert body.rstrip().endswith("<sub>Comment `/llmgate rerun` to run again.</sub>")
    for config in (small, *configs):
        assert f"| {config.path} | llmgate: {config.folder} |" in body
        assert f"{config.path}: " in body.split("\n---\n", 1)[1]  # a section of its own
    assert "### ✅ tiny/.llmgate.yml: pass" in body  # the small one keeps its full section
    output = report_multi.check_output(multi, "a" * 40)
    assert len(output.summary) <= 65535 and output.text == ""


def test_json_of_several_configs(tmp_path: Path) -> None:
    one = ConfigReport("a/.llmgate.yml", "a", GateReport("success", (), (), None, None))
    two = ConfigReport("b/.llmgate.yml", "b", _big_report("s", 1))
    doc = json.loads(report_multi.render_json(MultiReport((one, two), notes=("n",))))
    assert (doc["version"], doc["conclusion"], doc["checks"], doc["notes"]) == (
        1, "failure", "combined", ["n"])
    assert [(c["path"], c["folder"], c["report"]["conclusion"]) for c in doc["configs"]] == [
        ("a/.llmgate.yml", "a", "success"), ("b/.llmgate.yml", "b", "failure")]
    assert doc["configs"][1]["report"]["regressions"][0]["dataset"] == "evals/x.jsonl"
