"""``llmgate run --promote NAME`` and ``--compare-to NAME`` on a real git repository, with the
baseline store in a real Redis (worker/cli/named.py, worker/baselines/names.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis as redis_sync

from tests.unit.worker_support import ECHO, build_tiny_repo, commit, git
from worker.baselines.names import check_name, name_key
from worker.cli.main import (
    EXIT_CONFIG_ERROR,
    EXIT_EXECUTION_ERROR,
    EXIT_GATE_FAILED,
    EXIT_PASS,
    main,
)


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str) -> Path:
    """The tiny repository (main: 4 of 4 pass) with ``REDIS_URL`` set, as the current folder."""
    root = tmp_path / "repo"
    build_tiny_repo(root)
    monkeypatch.chdir(root)
    monkeypatch.setenv("REDIS_URL", redis_url)
    return root


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["run", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_a_release_promoted_on_main_is_compared_with_later(repo, capsys, redis_url):
    release = git(repo, "rev-parse", "main")
    code, _, err = run(capsys, "--promote", "release")
    assert code == EXIT_PASS
    assert f"promoted {release[:7]} (main) as the baseline release of local/repo: 1 suites" in err
    store = redis_sync.Redis.from_url(redis_url)
    pointer = json.loads(store.get(name_key("local/repo", "release")))
    assert (pointer["sha"], pointer["branch"], len(pointer["keys"])) == (release, "main", 1)
    assert store.ttl(pointer["keys"][0]) == -1  # kept while the name points at it

    # main then breaks bravo (3 of 4); a pull request from there changes only the README
    commit(repo, "main", {"echo.py": ECHO.replace('BROKEN = ""', 'BROKEN = "bravo"')})
    commit(repo, "pr/readme", {"README.md": "docs\n"})
    code, out, _ = run(capsys, "--base", "main", "--head", "pr/readme", "--format", "json")
    assert (code, json.loads(out)["conclusion"]) == (EXIT_PASS, "success")
    code, out, _ = run(capsys, "--compare-to", "release", "--head", "pr/readme",
                       "--format", "json")
    report = json.loads(out)
    assert (code, report["conclusion"]) == (EXIT_GATE_FAILED, "failure")
    assert report["base_sha"] == release
    assert {o["rule"]: o["status"] for o in report["outcomes"]}["max_drop 0.05"] == "fail"
    assert [r["example_id"] for r in report["regressions"]] == ["bravo"]
    # the stored suites, not a new base run
    assert report["notes"][0].startswith(f"compared with {release[:7]}, the baseline release "
                                         "(stored baseline from the push to main, ")
    assert (f"the base is the baseline release ({release[:7]} on main), not a merge base"
            in report["notes"])


@pytest.mark.slow
def test_promoting_again_moves_the_name_and_lets_the_old_records_expire(repo, capsys,
                                                                        redis_url):
    assert run(capsys, "--promote", "release")[0] == EXIT_PASS
    store = redis_sync.Redis.from_url(redis_url)
    old = json.loads(store.get(name_key("local/repo", "release")))["keys"][0]
    new_sha = commit(repo, "main", {"README.md": "v2\n"})
    assert run(capsys, "--promote", "release")[0] == EXIT_PASS
    pointer = json.loads(store.get(name_key("local/repo", "release")))
    assert pointer["sha"] == new_sha
    assert store.ttl(pointer["keys"][0]) == -1 and 0 < store.ttl(old) <= 30 * 24 * 3600


@pytest.mark.slow
def test_only_commits_on_the_default_branch_are_promoted(repo, capsys, redis_url):
    side = commit(repo, "pr/side", {"README.md": "side\n"})
    code, _, err = run(capsys, "--promote", "release", "--head", "pr/side")
    assert code == EXIT_EXECUTION_ERROR
    assert err == (f"llmgate: --promote stores only commits on the default branch main: "
                   f"{side[:7]} is not on it (merge first, or name its commit with --head)\n")
    assert redis_sync.Redis.from_url(redis_url).get(name_key("local/repo", "release")) is None


@pytest.mark.parametrize(("args", "message", "expected"), [
    (("--compare-to", "nope"), "no baseline named nope for local/repo: promote one with "
                               "`llmgate run --promote nope` on the default branch",
     EXIT_EXECUTION_ERROR),
    # a misuse of the options is 2, as every misuse of the command line (issue 33)
    (("--compare-to", "release", "--base", "main"),
     "--compare-to and --base both name the base: give one", EXIT_CONFIG_ERROR),
    (("--promote", "release", "--base", "main"),
     "--promote stores the head commit and gates nothing: drop --base/--compare-to",
     EXIT_CONFIG_ERROR),
    (("--promote", "../x"), "baseline name '../x' must be 1-64 letters, digits, '.', '_' or "
                            "'-', starting with a letter or digit (e.g. release, v2.1)",
     EXIT_CONFIG_ERROR),
])
def test_unusable_names_and_options_are_refused_in_one_line(repo, capsys, args, message,
                                                            expected):
    code, out, err = run(capsys, *args)
    assert (code, out, err) == (expected, "", f"llmgate: {message}\n")


def test_named_baselines_need_the_store(repo, capsys, monkeypatch):
    monkeypatch.delenv("REDIS_URL")
    code, _, err = run(capsys, "--compare-to", "release")
    assert (code, err) == (EXIT_CONFIG_ERROR, "llmgate: named baselines live in the baseline "
                           "store: set REDIS_URL to the App's Redis (or a local one)\n")


@pytest.mark.parametrize("name", ["release", "v2.1", "rc_1", "A-b"])
def test_valid_names(name):
    assert check_name(name) == name


def test_the_origin_remote_names_the_repository(repo):
    import asyncio

    from worker.checkout import local_origin
    git(repo, "remote", "add", "origin", "git@github.com:acme/tiny.git")
    assert asyncio.run(local_origin(repo)) == "acme/tiny"
    git(repo, "remote", "set-url", "origin", "https://github.com/acme/tiny.git")
    assert asyncio.run(local_origin(repo)) == "acme/tiny"
