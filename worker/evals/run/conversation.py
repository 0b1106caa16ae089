"""Multi-turn examples: answer a conversation turn by turn, then score each turn.

An example with ``turns`` (worker/evals/config/dataset.py) is one conversation. Its turns are
answered in order, each given the conversation so far:

- a model target gets the messages its prompt renders for the first turn, then for each later
  turn the model's own earlier answers (``assistant`` messages) and the last message its prompt
  renders for that turn's input (the user's next message); the response cache keys on the whole
  conversation, so a changed earlier answer changes every later key. An agent (a target with
  ``tools``) runs its tool loop within each turn; the history carries its final answers.
- a command target gets, next to ``id``, ``input`` (this turn's) and ``vars``, the turn number
  ``turn`` (1-based) and ``history``: ``[{"role": "user" | "assistant", "content": ...}]``,
  the earlier turns' inputs and outputs as they were (any JSON value).

A conversation stops at its first failed turn (a target error: the later turns would be asked
about an answer that does not exist); its later turns are not called.

Scoring: each answered turn is scored as an example of its own (`turn_example`: its input and
expected value; the suite's assertions, the example's ``assert`` and the turn's ``assert``), and
the turns are merged back into one result (`merge_turns`): the example passes when every turn
passes, its assertion results are every turn's with ``turn N:`` before each message, its output
and expected value are the lists of the turns'. The paired unit of the statistics stays the
example (the conversation), so a regression at turn 2 is one failed example at its dataset line.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from worker.evals.llm_types import RunUsage, Trace
from worker.evals.types import Example, ExampleResult, TargetOutput

#: A target's answer to one turn: (the turn as an example, the history so far) -> output.
AnswerTurn = Callable[[Example, list[dict[str, Any]]], Awaitable[TargetOutput]]


def turn_example(example: Example, number: int) -> Example:
    """Return turn ``number`` (1-based) of a multi-turn ``example`` as an example of its own.

    Its id, line, vars, tags and metadata are the example's; its input and expected value the
    turn's; its assertions the example's ``assert`` followed by the turn's.

    Raises:
        IndexError: ``number`` is not a turn of ``example``.
    """
    if not 1 <= number <= len(example.turns):
        raise IndexError(f"example {example.id!r} has no turn {number}")
    turn = example.turns[number - 1]
    return replace(example, input=turn.input, expected=turn.expected,
                   assertions=(*example.assertions, *turn.assertions), turns=(),
                   relevant_ids=None)


def each_turn(examples: Sequence[Example]) -> tuple[Example, ...]:
    """Return ``examples`` with every multi-turn example replaced by its turns (`turn_example`,
    ids ``<id>#turn<N>`` so each counts once): what the estimate counts
    (worker/evals/run/estimate.py), a call per turn."""
    found: list[Example] = []
    for example in examples:
        if not example.turns:
            found.append(example)
            continue
        found.extend(replace(turn_example(example, k), id=f"{example.id}#turn{k}")
                     for k in range(1, len(example.turns) + 1))
    return tuple(found)


async def run_conversation(example: Example, answer_turn: AnswerTurn) -> TargetOutput:
    """Answer every turn of ``example`` in order with ``answer_turn`` (module docstring).

    Returns:
        One output for the conversation: ``turns`` holds each answered turn's output; its
        ``output`` is the last answered turn's; ``error`` the first failed turn's, as
        ``turn N: ...``; latency (milliseconds), tokens, cost (USD, None when any turn's is
        unknown) and spend the turns' sums; ``cached`` when every turn's answer was; ``trace``
        (when any turn has one) every turn's tool calls and steps, ``turns`` the answered count.
    """
    history: list[dict[str, Any]] = []
    outputs: list[TargetOutput] = []
    for number in range(1, len(example.turns) + 1):
        turn = turn_example(example, number)
        output = await answer_turn(turn, list(history))
        outputs.append(output)
        if output.error is not None:
            break
        history += [{"role": "user", "content": turn.input},
                    {"role": "assistant", "content": output.output}]
    return combine(outputs)


def combine(outputs: Sequence[TargetOutput]) -> TargetOutput:
    """Return the output of a conversation from its turns' outputs (`run_conversation`)."""
    last = outputs[-1]
    failed = next(((k, o) for k, o in enumerate(outputs, 1) if o.error is not None), None)
    usage: dict[str, int] = {}
    for output in outputs:
        for key, count in output.usage.items():
            usage[key] = usage.get(key, 0) + count
    costs = [o.cost_usd for o in outputs]
    spend = sum((o.spend for o in outputs), RunUsage())
    base = replace(last, latency_ms=sum(o.latency_ms for o in outputs), usage=usage,
                   cost_usd=None if None in costs else sum(c or 0.0 for c in costs),
                   spend=spend, cached=all(o.cached for o in outputs),
                   trace=_trace(outputs), turns=tuple(outputs),
                   notes=tuple(f"turn {k}: {note}" for k, o in enumerate(outputs, 1)
                               for note in o.notes))
    if failed is None:
        return base
    number, output = failed
    return replace(base, output=None, error=f"turn {number}: {output.error}",
                   error_kind=output.error_kind, error_field=output.error_field)


def _trace(outputs: Sequence[TargetOutput]) -> Trace | None:
    traces = [o.trace for o in outputs if o.trace is not None]
    if not traces:
        return None
    steps = [t.steps for t in traces]
    tokens = [t.tokens for t in traces]
    costs = [t.cost_usd for t in traces]
    return Trace(tuple(c for t in traces for c in t.tool_calls),
                 None if None in steps else sum(s or 0 for s in steps), len(outputs),
                 None if None in tokens else sum(n or 0 for n in tokens),
                 None if None in costs else sum(c or 0.0 for c in costs))


def chat_turns(render_turn: Callable[[Example], list[dict[str, str]]],
               call: Callable[[Example, list[dict[str, Any]]], Awaitable[TargetOutput]]
               ) -> AnswerTurn:
    """Return the turn answerer of a model target for one conversation (module docstring).

    Args:
        render_turn: renders the target's prompt for a turn (``[{role, content}]``).
        call: answers a turn given its messages (the model, or an agent's tool loop).

    Returns:
        An `AnswerTurn` that sends, at the first turn, the rendered prompt; at each later turn,
        the messages sent so far, the model's answer to them and the last rendered message of
        the new turn.
    """
    conversation: list[dict[str, Any]] = []

    async def answer_turn(turn: Example, history: list[dict[str, Any]]) -> TargetOutput:
        rendered = render_turn(turn)
        messages = list(rendered) if not conversation else [*conversation, rendered[-1]]
        output = await call(turn, messages)
        conversation[:] = [*messages, {"role": "assistant", "content": _text(output.output)}]
        return output

    return answer_turn


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def merge_turns(example: Example, turns: Sequence[ExampleResult],
                answered: TargetOutput) -> ExampleResult:
    """Merge the scored turns of a conversation into the example's result (module docstring).

    Args:
        example: the multi-turn example.
        turns: each answered turn's result, in order (at least one).
        answered: the conversation's output (`run_conversation`).

    Returns:
        The example's result: passed when every turn of the conversation was answered and
        passed; errored and unscored as any turn; the assertions of every turn with
        ``turn N:`` before each message (and ``details["turn"]``); output and expected the
        lists of the turns'; latency, cost, tokens, spend and trace the conversation's.
    """
    first = turns[0]
    assertions = tuple(
        replace(a, message=f"turn {k}: {a.message}" if a.message else f"turn {k}",
                details={**a.details, "turn": k})
        for k, result in enumerate(turns, 1) for a in result.assertions)
    failed = next(((k, r) for k, r in enumerate(turns, 1) if r.errored), None)
    complete = len(turns) == len(example.turns)
    return replace(
        first, passed=complete and all(r.passed for r in turns),
        errored=failed is not None, unscored=any(r.unscored for r in turns),
        output=[r.output for r in turns], expected=example.expected, input=example.input,
        error=None if failed is None else f"turn {failed[0]}: {failed[1].error}",
        error_kind=None if failed is None else failed[1].error_kind,
        error_field="" if failed is None else failed[1].error_field,
        assertions=assertions, latency_ms=answered.latency_ms, cost_usd=answered.cost_usd,
        usage=dict(answered.usage), spend=sum((r.spend for r in turns), RunUsage()),
        cached=answered.cached, trace=answered.trace, label=None, custom={})
