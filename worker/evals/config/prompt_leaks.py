"""Find a model target's prompt that holds the dataset's expected answers (pure).

A prompt file is the pull request's; the dataset's ``expected`` values are the test. A prompt
that writes the answers out (``{% set answers = {"t1": "..."} %}``, or a "few-shot" block made
of the very examples it is scored on) passes without testing the model. `inlined_expected`
finds the examples whose expected text stands verbatim in the prompt's templates; the gate
reports them as a warning (worker/pipeline/exposure.py), not a failure: a prompt may quote a
policy sentence that is also an answer.

To keep false alarms rare only text of at least `MIN_INLINED_CHARS` characters counts (``yes``,
``4`` or ``billing`` stand in many a prompt by right), compared after folding case and runs of
white space; a structured ``expected`` counts by its strings, a conversation's by its turns'.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from worker.evals.config.prompts import PromptTemplate
from worker.evals.types import Example

#: Shortest expected text (characters, white space folded) whose presence in a prompt counts.
MIN_INLINED_CHARS = 20


def inlined_expected(template: PromptTemplate, examples: Iterable[Example]) -> list[str]:
    """Return the ids of ``examples`` whose expected text stands in ``template`` (module doc).

    Args:
        template: the model target's parsed prompt (its messages' template sources are read,
            not their renderings: an example's input or vars may quote its answer by right).
        examples: the suite's examples (base's dataset on head's target).

    Returns:
        Example ids in dataset order; [] when none.
    """
    text = _fold("\n".join(source for _, source in template.messages))
    return [e.id for e in examples if any(s in text for s in _long_texts(e.expected))]


def _long_texts(value: Any) -> Iterator[str]:
    """The strings of an expected value (nested lists and mappings), folded, long enough."""
    if isinstance(value, str):
        folded = _fold(value)
        if len(folded) >= MIN_INLINED_CHARS:
            yield folded
    elif isinstance(value, dict):
        yield from _long_texts(list(value.values()))
    elif isinstance(value, Sequence) and not isinstance(value, bytes):
        for item in value:
            yield from _long_texts(item)


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()
