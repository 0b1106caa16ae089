"""Model targets: render the prompt for an example and call the model (one answer per example).

The output is the model's text. Its cache key holds the model, the rendered messages, the call
parameters and the target's ``version`` (worker/evals/llm/cache.py); repeats bypass the cache. The
latency is the provider's time (for a cache hit, the time measured when the answer was first
fetched), the cost the answer's price (worker/evals/llm/cost.py).
"""

from __future__ import annotations

from typing import Any

from worker.evals.config import PromptTemplate, render
from worker.evals.llm import ModelCaller
from worker.evals.serialize import replaced_note
from worker.evals.types import Example, ModelTarget, TargetOutput


def answer_family(target: ModelTarget) -> str:
    """Return what makes the target's answers alike in length: its prompt file and version
    (the estimate expects answers as long as its recent ones, worker/evals/llm/cache.py)."""
    return f"{target.prompt}\n{target.version}"


async def run_model(target: ModelTarget, template: PromptTemplate, example: Example,
                    caller: ModelCaller, *, use_cache: bool = True,
                    messages: list[dict[str, Any]] | None = None) -> TargetOutput:
    """Answer one example with the target's model.

    Args:
        target: the model target.
        template: its parsed prompt file.
        example: the example (its input and vars fill the template).
        caller: the run's call path (cache, budget, retries).
        use_cache: False for repeats (independent draws).
        messages: the messages to send instead of the prompt rendered for ``example`` (a later
            turn of a conversation: worker/evals/run/conversation.py).

    Returns:
        The output (text, tokens, cost, latency), or an error with its kind (rate limited,
        provider, timeout, budget) and the provider's message, or of kind ``empty`` when the
        answer had no usable text (worker/evals/llm/provider.py: a failure, never cached). An
        answer without usage has no ``usage`` and no cost (unknown, not 0).

    Raises:
        ConfigError: the template cannot be rendered for this example.
    """
    if messages is None:
        messages = list(render(template, example))
    outcome = await caller.chat(target.endpoint, messages, kind="chat", version=target.version,
                                use_cache=use_cache, family=answer_family(target))
    answer = outcome.answer
    if answer is None:
        return TargetOutput(None, outcome.error, 0.0, error_kind=outcome.error_kind,
                            spend=outcome.spend, error_field=outcome.error_field)
    usage = {"input": answer.usage.input, "output": answer.usage.output,
             "cached_input": answer.usage.cached_input} if answer.usage.input else {}
    return TargetOutput(answer.text, None, answer.latency_ms, usage, answer.cost_usd,
                        spend=outcome.spend, cached=answer.cached,
                        notes=(replaced_note(answer.replaced),) if answer.replaced else ())
