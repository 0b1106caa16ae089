"""``llmgate baseline push`` stores every config of the commit (issue 19): the root config's and
its two folders' suites, each under its folder's namespace, in one commit of the git ref, so a
pull request's ``llmgate run --baseline-store`` makes zero base calls for every folder (counted
at the fake provider); a broken folder config fails the push with its file and line."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.fakes.fake_llm import FakeLLMServer
from tests.unit import llm_support
from tests.unit.llm_support import model_config
from tests.unit.worker_support import commit, git
from worker.baselines.local import DEFAULT_REF
from worker.cli.main import EXIT_CONFIG_ERROR, EXIT_PASS, main

pytestmark = pytest.mark.slow  # git processes and the fake provider's server
llm_server = llm_support.llm_server  # module fixtures
llm = llm_support.llm
ROWS = "".join(json.dumps(r) + "\n" for r in [{"id": "a", "input": "hi"},
                                              {"id": "b", "input": "ho"}])
FOLDERS = ("", "services/a", "services/b")
ASSERTION = "      - {type: contains, value: echo}\n"
#: 1-based line of the assertion in a config (misspelt in the broken folder).
ASSERTION_LINE = 8


def config_files(url: str, folder: str, assertion: str = ASSERTION) -> dict[str, str | None]:
    """One config's files in ``folder`` ("" the root, which lists the two services): a
    two-example model suite ``s`` whose prompt starts with the folder's name."""
    text = model_config(url, gate="{pass_rate: {min: 0.5, max_drop: 0.1}}", assertions=assertion)
    assert text.splitlines()[ASSERTION_LINE - 1] == assertion.rstrip("\n")
    prefix = f"{folder}/" if folder else ""
    if not folder:
        text += "configs:\n  - services/a\n  - services/b/.llmgate.yml\n"
    return {f"{prefix}.llmgate.yml": text, f"{prefix}evals/d.jsonl": ROWS,
            f"{prefix}prompts/p.txt": f"{folder or 'root'} says: {{{{ input }}}}"}


@pytest.fixture()
def repo(llm: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three configs on ``main`` (the root's and two folders'), a README change on ``pr``."""
    llm.setup({"default_reply": "echo"})
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, "main", {k: v for f in FOLDERS for k, v in config_files(llm.url, f).items()},
           "three configs")
    commit(root, "pr", {"README.md": "docs\n"})
    monkeypatch.chdir(root)
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    return root


def calls_by_folder(llm: FakeLLMServer) -> Counter[str]:
    """The provider's chat calls so far, by the folder whose prompt asked (``root`` too)."""
    return Counter(call["messages"][-1]["content"].split(" says:")[0]
                   for call in llm.calls("chat"))


def push(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["baseline", "push", "--no-push", *args])
    out, err = capsys.readouterr()
    return code, out, err


def pr_run(capsys: pytest.CaptureFixture[str], store: str) -> tuple[int, dict]:
    code = main(["run", "--base", "main", "--head", "pr", "--no-cache", "--format", "json",
                 "--baseline-store", store])
    out, err = capsys.readouterr()
    assert code == EXIT_PASS, err
    return code, json.loads(out)


def ref_log(repo: Path) -> list[str]:
    """The full messages of the ref's commits, newest first."""
    return [m.lstrip("\n") for m in
            git(repo, "log", "--format=%B%x00", DEFAULT_REF).split("\x00")[:-1]]


@pytest.mark.parametrize("kind", ["git", "directory"])
def test_a_pushed_commit_serves_every_folder_with_zero_base_calls(kind, repo, llm, tmp_path,
                                                                  capsys):
    store = {"git": "git", "directory": str(tmp_path / "store")}[kind]
    code, out, err = push(capsys, "--baseline-store", store)
    assert code == EXIT_PASS and "error" not in err
    assert calls_by_folder(llm) == {"root": 2, "services/a": 2, "services/b": 2}
    for path in (".llmgate.yml", "services/a/.llmgate.yml", "services/b/.llmgate.yml"):
        assert f"llmgate: {path}: stored s\n" in out
    assert "3 suites of 3 of 3 configs stored" in out

    _, report = pr_run(capsys, store)
    assert calls_by_folder(llm) == {"root": 4, "services/a": 4, "services/b": 4}  # head only
    sources = {c["path"]: c["report"]["base_source"] for c in report["configs"]}
    assert list(sources) == [".llmgate.yml", "services/a/.llmgate.yml",
                             "services/b/.llmgate.yml"]
    for path, source in sources.items():
        assert "stored baseline from the push to main" in source, path
        assert "base run now" not in source, path


def test_each_push_is_one_commit_of_the_ref_listing_what_it_stored(repo, llm, capsys):
    main_sha = git(repo, "rev-parse", "main")
    assert push(capsys)[0] == EXIT_PASS
    [message] = ref_log(repo)
    assert message.startswith(f"llmgate baseline push of {main_sha[:12]} (main): 3 suites\n\n")
    assert message.split("\n\n")[1].splitlines() == [  # in the configs' order
        f"{namespace}: s at {main_sha[:12]}"
        for namespace in ("local", "local/services/a", "local/services/b")]

    assert push(capsys)[0] == EXIT_PASS  # the same commit again: every suite reused
    assert len(ref_log(repo)) == 1 and len(llm.calls()) == 6

    moved = commit(repo, "main", {"services/a/evals/d.jsonl": ROWS + '{"id": "c", "input": "x"}\n'})
    code, out, _ = push(capsys)
    # a new commit: every suite runs again, the response cache answering what it knows
    assert code == EXIT_PASS and calls_by_folder(llm) == {"root": 2, "services/a": 3,
                                                           "services/b": 2}
    assert "3 suites of 3 of 3 configs stored" in out
    newest, first = ref_log(repo)
    assert newest.startswith(f"llmgate baseline push of {moved[:12]} (main): 3 suites") \
        and first == message
    records = git(repo, "ls-tree", "-r", "--name-only", DEFAULT_REF).splitlines()
    assert len(records) == 6  # the first push's records are still there
    assert {r.rsplit("/", 2)[1] for r in records} == {main_sha, moved}


def test_a_broken_folder_config_fails_the_push_with_its_line(repo, llm, capsys):
    broken = config_files(llm.url, "services/b", ASSERTION.replace("contains", "containz"))
    commit(repo, "main", {"services/b/.llmgate.yml": broken["services/b/.llmgate.yml"]})
    code, out, err = push(capsys)
    assert code == EXIT_CONFIG_ERROR
    assert f"llmgate: configuration error: services/b/.llmgate.yml:{ASSERTION_LINE}: " in err
    assert "containz" in err
    assert "llmgate: .llmgate.yml: stored s\n" in out
    assert "llmgate: services/a/.llmgate.yml: stored s\n" in out
    assert "llmgate: services/b/.llmgate.yml: not stored (configuration error)\n" in out
    assert "2 suites of 2 of 3 configs stored; not stored: services/b/.llmgate.yml" in out
    assert calls_by_folder(llm) == {"root": 2, "services/a": 2}
    [message] = ref_log(repo)
    assert "local/services/b" not in message and "local/services/a: s at" in message


def test_a_folder_dataset_missing_at_run_time_names_the_folder_config(repo, llm, capsys):
    commit(repo, "main", {"services/a/evals/d.jsonl": None})
    code, out, err = push(capsys)
    assert code == EXIT_CONFIG_ERROR
    assert ("llmgate: configuration error: services/a/.llmgate.yml:4: suite s: dataset "
            "evals/d.jsonl: file not found") in err
    assert "llmgate: services/a/.llmgate.yml: not stored (configuration error)\n" in out
    assert calls_by_folder(llm) == {"root": 2, "services/b": 2}


def test_a_remote_gets_the_ref_of_the_stored_folders(repo, llm, tmp_path, capsys):
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    code = main(["baseline", "push"])
    out, _ = capsys.readouterr()
    assert code == EXIT_PASS and f"pushed {DEFAULT_REF} to origin" in out
    assert git(remote, "rev-parse", DEFAULT_REF) == git(repo, "rev-parse", DEFAULT_REF)
