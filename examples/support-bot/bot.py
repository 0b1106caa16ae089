#!/usr/bin/env python3
"""A support-ticket triage bot: the example target that llmgate gates.

Usage: ``python3 bot.py INPUT_FILE OUTPUT_FILE``. INPUT_FILE holds llmgate's example
(``{"id", "input", "vars"}``; ``input`` is the ticket text); the bot writes
``{"output": LABEL}`` to OUTPUT_FILE, LABEL being one of ``billing``, ``bug``, ``account``,
``feature_request``, ``shipping`` or ``other``.

The bot stands in for a prompt-driven model: its behaviour lives in ``triage_rules.txt`` beside
it (the "prompt"), so a pull request that edits the rules changes the answers, which is what
llmgate catches. It is deterministic, uses the standard library only and runs in milliseconds.
When ``SUPPORT_BOT_CALL_LOG`` names a file, one line per call (the example id) is appended to
it, so tests can count invocations; llmgate passes the variable on because the config lists it
under ``settings.env``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

RULES_FILE = Path(__file__).resolve().with_name("triage_rules.txt")
FALLBACK_LABEL = "other"
Rules = list[tuple[str, list[re.Pattern[str]]]]


def load_rules(path: Path = RULES_FILE) -> Rules:
    """Read ``label: keyword, keyword, ...`` lines; ``#`` starts a comment.

    Raises:
        ValueError: a line without ``:`` or a label without keywords, naming the line.
    """
    rules: Rules = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        label, sep, words = line.partition(":")
        keywords = [w.strip().lower() for w in words.split(",") if w.strip()]
        if not sep or not label.strip() or not keywords:
            raise ValueError(f"{path.name}:{number}: expected 'label: keyword, keyword, ...'")
        rules.append((label.strip(), [re.compile(r"\b" + re.escape(k)) for k in keywords]))
    return rules


def classify(text: str, rules: Rules) -> str:
    """Return the label with the most keywords found in ``text``.

    A keyword matches at the start of a word, ignoring case ("refund" matches "refunded"). Ties
    go to the label listed first; no keyword at all gives ``other``.
    """
    lowered = text.lower()
    best_label, best_hits = FALLBACK_LABEL, 0
    for label, patterns in rules:
        hits = sum(1 for pattern in patterns if pattern.search(lowered))
        if hits > best_hits:
            best_label, best_hits = label, hits
    return best_label


def main(argv: list[str]) -> int:
    """Classify the ticket of ``argv[1]`` into ``argv[2]``; return the exit code."""
    if len(argv) != 3:
        print("usage: bot.py INPUT_FILE OUTPUT_FILE", file=sys.stderr)
        return 2
    try:
        example = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        rules = load_rules()
    except (OSError, ValueError) as err:
        print(f"bot.py: {err}", file=sys.stderr)
        return 1
    ticket = example.get("input") if isinstance(example, dict) else None
    text = ticket if isinstance(ticket, str) else json.dumps(ticket)
    Path(argv[2]).write_text(json.dumps({"output": classify(text, rules)}), encoding="utf-8")
    call_log = os.environ.get("SUPPORT_BOT_CALL_LOG")
    if call_log:
        with open(call_log, "a", encoding="utf-8") as log:
            log.write(f"{example.get('id', '')}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
