"""A crude, deterministic RAG judge for the fake provider (tests/fakes/fake_llm.py).

A fake rule with ``"rag_judge": true`` answers llmgate's built-in RAG criteria
(worker/evals/score/rag_judges.py) by word overlap instead of a fixed reply: a sentence is
supported when every content word of it (lower case, 4 letters or more, or a number; a trailing
``s`` dropped) occurs in the retrieved contexts. ``faithfulness`` lists the answer's unsupported
sentences (an answer saying it "could not find" the answer claims nothing), ``context_recall``
the reference's, ``context_relevance`` fails when under half the input's words are in the
contexts, ``answer_relevance`` when the answer shares none of them. The reply ends with
``VERDICT: PASS`` or ``VERDICT: FAIL``, the findings each on a ``LABEL: sentence`` line.
"""

from __future__ import annotations

import re

_STOP_WORDS = ("what when where which does have this that with from your there their about "
               "will would could should")
_STOP = frozenset(_STOP_WORDS.split())


def _words(text: str) -> set[str]:
    found = set()
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word.isdigit() or (len(word) >= 4 and word not in _STOP):
            found.add(word[:-1] if word.endswith("s") and len(word) > 4 else word)
    return found


def _between(text: str, tag: str) -> list[str]:
    return re.findall(rf"<{tag}[^>]*>\n(.*?)\n</{tag}>", text, re.DOTALL)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def rag_reply(text: str) -> str:
    """Return the judge's reply to a prompt of the RAG template (module docstring)."""
    name = re.search(r"Rubric \((\w+)\):", text)
    criterion = name[1] if name else ""
    context = _words(" ".join(_between(text, "context")))
    question = " ".join(_between(text, "input"))
    if criterion in ("faithfulness", "context_recall"):
        graded = _between(text, "answer" if criterion == "faithfulness" else "reference")
        label = "UNSUPPORTED" if criterion == "faithfulness" else "MISSING"
        bad = [s for s in _sentences(" ".join(graded))
               if "could not find" not in s and not _words(s) <= context]
        lines = [f"{label}: {s}" for s in bad]
        return "\n".join([*lines, f"VERDICT: {'FAIL' if bad else 'PASS'}"])
    asked = _words(question)
    if criterion == "context_relevance":
        ok = len(asked & context) * 2 >= len(asked)
        return "MISSING: what the question asks\nVERDICT: FAIL" if not ok else "VERDICT: PASS"
    answer = _words(" ".join(_between(text, "answer")))
    return "VERDICT: PASS" if asked & answer else "UNANSWERED: the question\nVERDICT: FAIL"
