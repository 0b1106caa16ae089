#!/usr/bin/env python3
"""Build the RAG example into a git repository with two breaking PRs and a fixing one.

Usage: ``python3 examples/rag-bot/build_repo.py DEST [--judge-api-base URL]``. DEST must not
exist or be empty. Branches (fixed authors and dates, so the SHAs repeat on every machine unless
``--judge-api-base`` changes the config):

- ``main``: the bot searching titles and bodies, answering by quoting the retrieved documents;
- ``pr/retrieval`` (from main): searches titles only; 6 of 14 questions retrieve nothing
  relevant (``recall_at_k`` 1.0 -> 0.571);
- ``pr/grounding`` (from main): answers refund and return questions from the bot's stale
  memory; 5 answers make claims no retrieved document supports (``faithfulness`` fails);
- ``pr/fix`` (on ``pr/retrieval``): searches bodies again, and retrieves 4 documents.

``--judge-api-base URL`` writes the judge's ``api_base`` into ``.llmgate.yml`` (the tests point
it at their local fake provider). Prints ``{branch: sha}`` as JSON. Needs git >= 2.28 only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
NAME, EMAIL = "RAG Bot Example", "rag-bot@example.invalid"
#: (branch, branch it starts from, variant folder of its rag.json or None, date, message).
COMMITS = (
    ("main", None, None, "2024-06-01T09:00:00+00:00",
     "Add the help-desk RAG bot, its documents and its evals"),
    ("pr/retrieval", "main", "pr-retrieval", "2024-06-02T09:00:00+00:00",
     "Search document titles only\n\nThe body index is slow; titles should be enough."),
    ("pr/grounding", "main", "pr-grounding", "2024-06-03T09:00:00+00:00",
     "Answer from the bot's own knowledge when it has some"),
    ("pr/fix", "pr/retrieval", "pr-fix", "2024-06-04T09:00:00+00:00",
     "Search bodies again and retrieve four documents"),
)


def files() -> list[str]:
    """Return the repository's files, relative to this directory."""
    docs = sorted(f"docs/{p.name}" for p in (HERE / "docs").glob("*.md"))
    return [".llmgate.yml", "rag.py", "rag.json", "evals/questions.jsonl", *docs]


def git(dest: Path, date: str, *args: str) -> str:
    """Run git in ``dest`` with a fixed identity and date, ignoring user and system config."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(dest), "LANG": "C",
           "TZ": "UTC", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    for role in ("AUTHOR", "COMMITTER"):
        env.update({f"GIT_{role}_NAME": NAME, f"GIT_{role}_EMAIL": EMAIL,
                    f"GIT_{role}_DATE": date})
    done = subprocess.run(["git", "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false",
                           "-C", str(dest), *args], env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def build(dest: Path, judge_api_base: str | None = None) -> dict[str, str]:
    """Create the repository at ``dest``; return branch name -> commit SHA.

    Raises:
        FileExistsError: ``dest`` exists and is not an empty directory.
        RuntimeError: a git command failed (its stderr is in the message).
    """
    used = dest.exists() and (not dest.is_dir() or any(dest.iterdir()))
    if used:
        raise FileExistsError(f"{dest} exists and is not an empty directory")
    dest.mkdir(parents=True, exist_ok=True)
    git(dest, COMMITS[0][3], "init", "-q", "-b", "main")
    for name in files():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes((HERE / name).read_bytes())
    if judge_api_base is not None:
        config = (dest / ".llmgate.yml").read_text(encoding="utf-8")
        (dest / ".llmgate.yml").write_text(config.replace(
            "api_key_env: OPENAI_API_KEY}", f'api_key_env: OPENAI_API_KEY, '
            f'api_base: "{judge_api_base}"}}'), encoding="utf-8")
    shas: dict[str, str] = {}
    for branch, parent, variant, date, message in COMMITS:
        if parent is not None:
            git(dest, date, "switch", "-q", "-c", branch, parent)
        if variant is not None:
            (dest / "rag.json").write_bytes((HERE / "variants" / variant / "rag.json")
                                            .read_bytes())
        git(dest, date, "add", "--", *files())
        git(dest, date, "commit", "-q", "-m", message)
        shas[branch] = git(dest, date, "rev-parse", "HEAD")
    git(dest, COMMITS[0][3], "switch", "-q", "main")
    return shas


def main(argv: list[str]) -> int:
    """Build the repository named on the command line and print its SHAs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--judge-api-base", default=None)
    args = parser.parse_args(argv)
    try:
        print(json.dumps(build(args.dest, args.judge_api_base)))
    except (FileExistsError, RuntimeError) as err:
        print(f"build_repo.py: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
