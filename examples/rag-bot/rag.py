#!/usr/bin/env python3
"""A tiny retrieval-augmented help-desk bot: the example target that llmgate gates.

Usage: ``python3 rag.py INPUT_FILE OUTPUT_FILE``. INPUT_FILE holds llmgate's example
(``{"id", "input", "vars"}``; ``input`` is the customer's question); the bot writes
``{"output": ANSWER, "contexts": [PASSAGE, ...], "retrieved_ids": [DOC_ID, ...]}``.

Retrieval: every Markdown file of ``docs/`` is a document (its id is the file name without
``.md``, its title the first ``# `` line). A document scores the number of the question's words
(lower case, a trailing ``s``/``ed``/``ing`` dropped, stop words left out) found in the fields
``rag.json`` names under ``search`` (``title``, ``body``; title words count twice); the
``top_k`` best with a score above 0 are retrieved, ties by id. Answer: with ``"answer":
"contexts"``, the sentence of the retrieved documents sharing most words with the question,
quoted as it stands; with ``"answer": "memory"``, what the bot "remembers" about the topic
(``MEMORY``, out of date), falling back to the contexts. Standard library only, deterministic,
a few milliseconds per question.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETTINGS_FILE = HERE / "rag.json"
DOCS = HERE / "docs"
STOP_WORDS = ("a an and are as at be by can do does for from get how i if in is it long many me "
              "my of on or the to what when where which who why will with you your")
STOP = frozenset(STOP_WORDS.split())
#: Answers the bot learnt long ago: no document says them any more.
MEMORY = {
    "refund": "Refunds are paid by cheque within 90 days.",
    "return": "You can return any item within one year, no questions asked.",
}


def words(text: str) -> list[str]:
    """Return the content words of ``text``: lower case, crudely stemmed, stop words dropped."""
    found = []
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word in STOP or len(word) < 3:
            continue
        for suffix in ("ing", "ed", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        found.append(word)
    return found


def load_docs(folder: Path = DOCS) -> dict[str, tuple[str, str]]:
    """Return doc id -> (title, body) for every ``*.md`` of ``folder``."""
    docs = {}
    for path in sorted(folder.glob("*.md")):
        lines = path.read_text(encoding="utf-8").strip().splitlines()
        title = lines[0].lstrip("# ").strip() if lines and lines[0].startswith("#") else ""
        docs[path.stem] = (title, "\n".join(lines[1:] if title else lines).strip())
    return docs


def retrieve(question: str, docs: dict[str, tuple[str, str]], settings: dict) -> list[str]:
    """Return the ids of the ``top_k`` best-scoring documents (module docstring)."""
    asked = set(words(question))
    fields = settings.get("search", ["title", "body"])
    scores = {}
    for doc_id, (title, body) in docs.items():
        score = 2 * len(asked & set(words(title))) if "title" in fields else 0
        score += len(asked & set(words(body))) if "body" in fields else 0
        if score > 0:
            scores[doc_id] = score
    ranked = sorted(scores, key=lambda d: (-scores[d], d))
    return ranked[: int(settings.get("top_k", 3))]


def answer(question: str, passages: list[str], settings: dict) -> str:
    """Return the answer: a quoted sentence of the passages, or the bot's memory."""
    asked = set(words(question))
    if settings.get("answer") == "memory":
        for topic, remembered in MEMORY.items():
            if topic in asked:
                return remembered
    sentences = [s.strip() for p in passages for s in re.split(r"(?<=[.!?])\s+", p)
                 if s.strip() and not s.startswith("#")]
    if not sentences:
        return "Sorry, I could not find that in our help pages."
    return max(sentences, key=lambda s: len(asked & set(words(s))))


def main(argv: list[str]) -> int:
    """Read the example from ``argv[1]``, write the answer to ``argv[2]``."""
    if len(argv) != 3:
        print("usage: rag.py INPUT_FILE OUTPUT_FILE", file=sys.stderr)
        return 2
    example = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    settings = json.loads(SETTINGS_FILE.read_text(encoding="utf-8"))
    question = str(example["input"])
    docs = load_docs()
    ids = retrieve(question, docs, settings)
    passages = [f"# {docs[i][0]}\n{docs[i][1]}" for i in ids]
    result = {"output": answer(question, passages, settings), "contexts": passages,
              "retrieved_ids": ids}
    Path(argv[2]).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
