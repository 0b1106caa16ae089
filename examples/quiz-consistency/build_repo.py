#!/usr/bin/env python3
"""Build the quiz-consistency example into a git repository with an order-dependent and a fixing PR.

Usage: ``python3 examples/quiz-consistency/build_repo.py DEST [--api-base URL]``. DEST must not
exist or be empty; ``--api-base`` replaces the config's model endpoint (the fake provider's
URL in tests). Three commits, with fixed authors and dates:

- ``main``: the quiz prompt; the model reads the options' texts, so every variant is right;
- ``pr/order``, on ``main``: a "faster" prompt after which the model answers the label it
  remembers for the question: right on the original order and when only separators change,
  wrong once the options are reordered. Accuracy on the originals holds (1.0); RC_agree and
  CORE fall, so the gate fails;
- ``pr/fix``, on ``pr/order``: a prompt that reads the options again; the gate passes.

``python3 build_repo.py --fake-setup`` prints the fake provider's setup (recorded.json) that
answers so. Prints ``{"main": sha, "pr/order": sha, "pr/fix": sha}`` as JSON. Needs git >= 2.28.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILES = (".llmgate.yml", "prompts/quiz.txt", "evals/quiz.jsonl")
NAME, EMAIL = "Quiz Example", "quiz@example.invalid"
DEFAULT_API_BASE = "http://127.0.0.1:8932/v1"
#: The phrase of pr/order's prompt that makes the fake model answer by remembered label.
BY_LABEL = "the label you remember"
COMMITS = (
    ("main", None, "2024-06-01T09:00:00+00:00", "Add the quiz model and its consistency suite"),
    ("pr/order", "pr-order", "2024-06-02T09:00:00+00:00",
     "Make the quiz prompt shorter and faster"),
    ("pr/fix", "pr-fix", "2024-06-03T09:00:00+00:00",
     "Tell the quiz model to read the options' texts"),
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


def build(dest: Path, api_base: str = DEFAULT_API_BASE) -> dict[str, str]:
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
        text = (HERE / name).read_text()
        target.write_text(text.replace(DEFAULT_API_BASE, api_base))
    shas: dict[str, str] = {}
    for branch, variant, date, message in COMMITS:
        if variant is not None:
            git(dest, "switch", "-q", "-c", branch, date=date)
            (dest / "prompts/quiz.txt").write_bytes(
                (HERE / "variants" / variant / "prompts/quiz.txt").read_bytes())
        git(dest, "add", "--", *FILES, date=date)
        git(dest, "commit", "-q", "-m", message, date=date)
        shas[branch] = git(dest, "rev-parse", "HEAD", date=date)
    git(dest, "switch", "-q", "main")
    return shas


def fake_setup() -> dict[str, object]:
    """The fake provider's rules: under pr/order's prompt the original label of the right
    option; otherwise the label under which the variant shows the right option's text."""
    rules: list[dict[str, object]] = []
    questions = [json.loads(line) for line in (HERE / "evals/quiz.jsonl").open()]
    for q in questions:
        right = next(o for o in q["options"] if o["is_correct"])
        rules.append({"match": [BY_LABEL, q["stem"]], "reply": f"Answer: {right['label']}"})
    for q in questions:
        right = next(o for o in q["options"] if o["is_correct"])["text"]
        for label in "ABCD":  # no option's text starts with another's, so this is exact
            rules.append({"match": [q["stem"], f"{label}. {right}"],
                          "reply": f"Answer: {label}"})
    return {"rules": rules, "default_reply": "I am not sure."}


def main(argv: list[str]) -> int:
    """Build the repository named by ``argv[1]`` and print its SHAs; return the exit code."""
    if argv[1:] == ["--fake-setup"]:
        print(json.dumps(fake_setup(), indent=1))
        return 0
    api_base = DEFAULT_API_BASE
    if len(argv) == 4 and argv[2] == "--api-base":
        api_base = argv[3]
    elif len(argv) != 2:
        print("usage: build_repo.py DEST [--api-base URL] | build_repo.py --fake-setup",
              file=sys.stderr)
        return 2
    try:
        shas = build(Path(argv[1]), api_base)
    except (OSError, RuntimeError) as err:
        print(f"build_repo.py: {err}", file=sys.stderr)
        return 1
    print(json.dumps(shas))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
