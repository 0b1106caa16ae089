#!/usr/bin/env python3
"""Build the support-bot example into a git repository with a regressing and a fixing PR.

Usage: ``python3 examples/support-bot/build_repo.py DEST``. DEST must not exist or be empty.
It gets three commits, with fixed authors, committers and dates so the SHAs are the same on
every machine:

- ``main``: the bot, its rules (44 of 46 tickets pass, pass rate 0.957);
- ``pr/regress``: someone "simplifies" the rules; 33 of 46 pass (0.717), below the gate's
  ``min 0.80`` and more than its ``max_drop 0.05`` under main;
- ``pr/fix``, on top of ``pr/regress``: restores the rules and adds a phrase; 45 of 46 (0.978).

Prints ``{"main": sha, "pr/regress": sha, "pr/fix": sha}`` as JSON on stdout. Needs git >= 2.28
and nothing else: the global and system git configs are ignored.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Files of the built repository, relative to its root (and to this directory).
FILES = (".llmgate.yml", "bot.py", "triage_rules.txt", "evals/tickets.jsonl")
NAME, EMAIL = "Support Bot Example", "support-bot@example.invalid"
#: (branch, variant whose triage_rules.txt replaces the current one or None, date, message).
COMMITS = (
    ("main", None, "2024-05-01T09:00:00+00:00", "Add the support-ticket triage bot and its evals"),
    ("pr/regress", "pr-regress", "2024-05-02T09:00:00+00:00",
     "Simplify the triage rules\n\nDrop the keywords that rarely match, to keep the rules short."),
    ("pr/fix", "pr-fix", "2024-05-03T09:00:00+00:00",
     "Restore the triage rules and catch 'any plan to' feature requests"),
)


def git(dest: Path, *args: str, date: str = COMMITS[0][2]) -> str:
    """Run git in ``dest`` with a fixed identity and date, ignoring user and system config."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(dest), "LANG": "C",
           "TZ": "UTC", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_AUTHOR_NAME": NAME, "GIT_AUTHOR_EMAIL": EMAIL, "GIT_AUTHOR_DATE": date,
           "GIT_COMMITTER_NAME": NAME, "GIT_COMMITTER_EMAIL": EMAIL, "GIT_COMMITTER_DATE": date}
    command = ["git", "-c", f"user.name={NAME}", "-c", f"user.email={EMAIL}",
               "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", "-C", str(dest), *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def build(dest: Path) -> dict[str, str]:
    """Create the repository at ``dest``; return branch name -> commit SHA.

    Raises:
        FileExistsError: ``dest`` exists and is not an empty directory.
        RuntimeError: a git command failed (its stderr is in the message).
    """
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise FileExistsError(f"{dest} exists and is not an empty directory")
    dest.mkdir(parents=True, exist_ok=True)
    git(dest, "init", "-q", "-b", "main")
    for name in FILES:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((HERE / name).read_bytes())
        target.chmod(0o644)
    shas: dict[str, str] = {}
    for branch, variant, date, message in COMMITS:
        if variant is not None:
            git(dest, "switch", "-q", "-c", branch, date=date)
            (dest / "triage_rules.txt").write_bytes(
                (HERE / "variants" / variant / "triage_rules.txt").read_bytes())
        git(dest, "add", "--", *FILES, date=date)
        git(dest, "commit", "-q", "-m", message, date=date)
        shas[branch] = git(dest, "rev-parse", "HEAD", date=date)
    git(dest, "switch", "-q", "main")
    return shas


def main(argv: list[str]) -> int:
    """Build the repository named by ``argv[1]`` and print its SHAs; return the exit code."""
    if len(argv) != 2:
        print("usage: build_repo.py DEST", file=sys.stderr)
        return 2
    try:
        shas = build(Path(argv[1]))
    except (OSError, RuntimeError) as err:
        print(f"build_repo.py: {err}", file=sys.stderr)
        return 1
    print(json.dumps(shas))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
