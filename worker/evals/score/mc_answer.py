"""``mc_answer``: read which option a free-text answer names, and check it (pure).

The assertion of every consistency suite (worker/evals/config/consistency.py). The options come
from the example's ``metadata.consistency.options`` (``[shown label, dataset label, text]``).
An answer names an option, in this order of trust:

1. a statement ``answer: X`` / ``answer is X`` (also ``answer is option X``, ``Answer: (X)``),
   the last such statement winning (a model that corrects itself states its final answer last);
2. a mention ``option X`` when all such mentions name one option;
3. the whole reply is a label, give or take brackets and punctuation (``B``, ``(b).``);
4. the reply holds exactly one option's text, as whole words (case-insensitive);
5. the reply starts with a label marker: ``B)``, ``(B)``, ``B.``, ``B:``.

In 1 and 2 a label matches in any case (``the answer is b``), but a label that is also an
English one-letter word (``a``, ``i``) written in another case and followed by a word is read
as that word: ``the answer is a bit unclear`` states nothing.

Anything else (no option, or two options' texts and no statement) is **unparseable**: counted
(`UNPARSEABLE`), shown in the report, and never right. Markdown bold (``**``) is ignored. The
details keep ``answer`` (the dataset label of the option named, or None) and ``shown`` (its
label in this variant), so answers to differently ordered variants compare by option.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from worker.evals.types import Example, TargetOutput

#: The ``reason`` detail of an answer that names no option.
UNPARSEABLE = "unparseable"
Outcome = tuple[bool, str, dict[str, Any]]


def extract(text: str, options: Sequence[tuple[str, str]]) -> str | None:
    """Return the shown label of the option ``text`` names (module docstring), or None.

    Args:
        text: the target's answer.
        options: ``(shown label, option text)`` pairs of the variant asked.
    """
    reply = text.strip().replace("**", "")
    labels = [label for label, _ in options]
    alternatives = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
    stated = _labels_after(_STATEMENT, alternatives, reply, labels)
    if stated:
        return stated[-1]
    mentioned = set(_labels_after(_OPTION, alternatives, reply, labels))
    if len(mentioned) == 1:
        return mentioned.pop()
    bare = reply.strip(" \t\n.:;!()[]")
    for label in labels:
        if bare.lower() == label.lower():
            return label
    named = {label for label, option in options
             if re.search(rf"(?<!\w){re.escape(option)}(?!\w)", reply, re.IGNORECASE)}
    if len(named) == 1:
        return named.pop()
    marker = re.match(rf"[(\[]?({alternatives})[)\].:](?:\s|$)", reply)
    return marker.group(1) if marker else None


_STATEMENT = r"\banswer(?:\s+is|\s*:)\s*(?:option\s+)?"
_OPTION = r"\boption\s+"
_ONE_LETTER_WORDS = ("a", "i")


def _labels_after(lead: str, alternatives: str, reply: str, labels: Sequence[str]) -> list[str]:
    """Labels (as shown) named right after ``lead`` in ``reply``, in order, in any case."""
    found = []
    pattern = rf"{lead}[(\[]?({alternatives})(?![A-Za-z0-9])"
    for m in re.finditer(pattern, reply, re.IGNORECASE):
        said = m.group(1)
        exact = [label for label in labels if label == said]
        label = exact[0] if exact else next(lb for lb in labels if lb.lower() == said.lower())
        if said != label and said.lower() in _ONE_LETTER_WORDS \
                and re.match(r"\s+[A-Za-z]", reply[m.end():]):
            continue
        found.append(label)
    return found


def check(params: dict[str, Any], output: Any, example: Example,
          target: TargetOutput | None = None) -> Outcome:
    """Check that ``output`` names the right option: ``(passed, message, details)``."""
    meta = example.metadata.get("consistency", {})
    options = [(str(shown), str(text)) for shown, _, text in meta.get("options", [])]
    by_shown = {str(shown): str(label) for shown, label, _ in meta.get("options", [])}
    text = output if isinstance(output, str) else "" if output is None else str(output)
    shown = extract(text, options)
    if shown is None:
        return False, f"unparseable: the answer names no single option ({_clip(text)})", \
            {"answer": None, "shown": None, "reason": UNPARSEABLE}
    answer = by_shown[shown]
    right = str(meta.get("correct"))
    details = {"answer": answer, "shown": shown}
    if answer == right:
        return True, "", details
    texts = dict(options)
    return False, (f"answered {shown} ({_clip(texts[shown], 60)}), the right option here is "
                   f"{example.expected} ({_clip(texts.get(str(example.expected), ''), 60)})"), \
        details


def _clip(text: str, limit: int = 120) -> str:
    return repr(text if len(text) <= limit else f"{text[:limit]}...")
