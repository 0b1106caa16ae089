"""Estimate a run's provider calls, tokens and USD before it sends any.

Per suite: the model target answers every example ``repeats`` times; each ``llm_judge`` judges
every answer ``n`` times (prompt: the judge template with the input, the reference and the
answer); each ``similar`` makes one embeddings call per answer; traps add one judge call per
trap, judge and draw; ``pairwise`` adds two judge calls per example (when a base runs). An
agent (a model target with ``tools``) is counted at its worst case, ``max_steps`` calls per
example and draw, less the steps the cache answers (worker/evals/run/agent_estimate.py); step k
(from 0) sends the prompt, the tools and k earlier answers, so its prompt is counted as the
first's plus k expected completions (tool results, unknown before the run, are not). An
in-process ``local/<name>`` embedding model (worker/evals/llm/local_embed.py) is no provider call
and costs nothing, so it is not counted (like a command target's runs). A conversation (an
example with ``turns``, worker/evals/run/conversation.py) is counted as one example per turn, each
with its own calls and judges; a later turn's prompt is counted without the earlier turns (their
answers are unknown before the run) and as not cached, so its calls are right and its prompt
tokens low; ``max_cost_usd`` still stops the spending.

What the response cache will answer costs nothing and is counted as cached (cache mode ``use``,
no repeats): a target's answer held for its key, and then, since that answer is known, the
judge and embedding calls on it whose keys are held too (so are trap judgements). Prompt tokens
are counted with litellm's tokenizer for the model (the first `TOKENIZED_SAMPLE` prompts of a
model, the others from their length at the same tokens per character). A call's completion
tokens are expected to be the mean of the last answers of its family (a target's model and
prompt file, a judge's model and prompt version) kept by the response cache
(worker/evals/llm/cache.py), at most its ``max_tokens``; a family without answers yet (a first run,
no cache) is expected to use its ``max_tokens``, else ``settings.estimate_output_tokens``, so
a first estimate tends to be high. An unknown answer is put into judge prompts as a text of the
expected length. USD uses the prices of worker/evals/llm/cost.py; it is None when a model has no
known price, and every such model the run will call is listed with the line that names it; under
``max_cost_usd`` also one whose calls the cache answers, since the run refuses an unpriced model
whatever the cache holds: a cached answer never stands in for a call the run could not make
(issue 30).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from worker.errors import ConfigError
from worker.evals.config import PromptTemplate, load_prompt, load_suite_dataset, render
from worker.evals.llm import ModelCaller, call_cost_usd, local_embed, max_tokens, parse_endpoint
from worker.evals.llm import client as llm
from worker.evals.llm_types import CostEstimate, Endpoint, TokenUsage
from worker.evals.run.agent_estimate import known_steps
from worker.evals.run.agent_target import agent_endpoint
from worker.evals.run.conversation import each_turn
from worker.evals.run.model_target import answer_family
from worker.evals.run.traps import load_traps
from worker.evals.score import (
    JUDGE_TYPES,
    PAIRWISE_TEMPLATE_VERSION,
    JudgeSpec,
    criterion_specs,
    embed_texts,
    judge_messages,
    judge_spec,
)
from worker.evals.types import AssertionSpec, Config, Example, ModelTarget, Settings, SuiteConfig

#: Prompts of a model counted with its tokenizer; the rest are estimated from their length at
#: the tokens-per-character ratio of those (tokenizing every prompt of a large suite costs
#: about as much time as the run it estimates).
TOKENIZED_SAMPLE = 20


@dataclass(frozen=True)
class ModelUse:
    """Where a config uses a model: what to annotate when the model cannot be priced.

    Attributes:
        model: the litellm model string.
        path: the file naming it (the config, or the dataset of a per-example assertion).
        line: 1-based line of the target or assertion that calls it, or None.
        what: what calls it and where its fields are, e.g. ``the target`` or
            ``settings.judge (used by llm_judge)``.
    """

    model: str
    path: str
    line: int | None
    what: str


@dataclass(frozen=True)
class Estimate:
    """What a run is expected to send, and the models it calls that have no known price.

    Attributes:
        cost: calls, tokens and USD (None when a model of a call to send has no price).
        unpriced: the first use of each model without a known price that the run will call
            (under ``max_cost_usd``, calls the cache answers count too: `_Tally.add_cached`).
        suites: (suite name, calls expected, sent or cached) per suite in run order, a name
            two configs share once with both counts; the ``judgings`` under "" (when any).
        endpoints: each endpoint the run will call (sent or cached: a cached answer never
            stands in for a call the run could not make) with its first use, so a caller can
            refuse the run before anything is sent (worker/pipeline/preflight.py).
    """

    cost: CostEstimate
    unpriced: tuple[ModelUse, ...] = ()
    suites: tuple[tuple[str, int], ...] = ()
    endpoints: tuple[tuple[Endpoint, ModelUse], ...] = ()


@dataclass(frozen=True)
class Judging:
    """A judge call on a given answer outside the suites' examples, counted in the run's
    estimate: a gate's judge calibration on base's labelled answers
    (worker/pipeline/judge_trust.py), which spends the run's budget.

    Attributes:
        judge: the criterion's resolved judge (its ``n`` draws are counted).
        example: the labelled row as an example (input, reference); answer: its output.
        use: where the judge is named, for an unpriced model's annotation.
    """

    judge: JudgeSpec
    example: Example
    answer: Any
    use: ModelUse


@dataclass(frozen=True)
class _Call:
    """Calls of one kind for one example: ``count`` calls of ``endpoint``, each with these
    tokens; ``keys`` are their cache keys when the cache may answer them, else (). With
    ``prompt``, ``tokens_in`` is counted from it once some of the calls are not cached
    (`_count`): a run the cache answers counts no tokens (and needs no tokenizer: litellm's
    import is skipped)."""

    endpoint: Endpoint
    count: int
    tokens_in: int
    tokens_out: int
    use: ModelUse
    keys: tuple[str, ...] = ()
    prompt: list[dict[str, str]] | None = None


@dataclass
class _Tally:
    calls: int = 0
    cached: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = 0.0
    unpriced: dict[str, ModelUse] = field(default_factory=dict)
    sampled: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    lengths: dict[str, int] = field(default_factory=dict)
    seen: set[tuple[str, str]] = field(default_factory=set)  # (call key, example id) counted
    called: dict[tuple[str, str | None, str | None], tuple[Endpoint, ModelUse]] = \
        field(default_factory=dict)  # model, api_base, api_key_env -> first use

    async def tokens(self, model: str, messages: list[dict[str, str]]) -> int:
        """Count a prompt's tokens: exactly for the first prompts of a model, then by ratio
        (litellm's tokenizer, imported off the event loop when first needed)."""
        chars = sum(len(m.get("content", "")) for m in messages) + 1
        count, tokens, seen = self.sampled.get(model, (0, 0, 0))
        if count < TOKENIZED_SAMPLE:
            await llm.load_to_count(model)
            exact = llm.count_tokens(model, messages)
            self.sampled[model] = (count + 1, tokens + exact, seen + chars)
            return exact
        return round(chars * tokens / seen)

    def add_cached(self, caller: ModelCaller, endpoint: Endpoint, use: ModelUse,
                   hits: int) -> None:
        """Count ``hits`` calls the cache answers; under the caller's ``max_cost_usd`` list
        their model when it has no known price, as if they were sent (the module docstring)."""
        if hits <= 0:
            return
        self.cached += hits
        self.called.setdefault((endpoint.model, endpoint.api_base, endpoint.api_key_env),
                               (endpoint, use))
        if caller.budget.max_cost_usd is not None and caller.prices(endpoint) is None:
            self.unpriced.setdefault(endpoint.model, use)

    def add(self, caller: ModelCaller, call: _Call, count: int | None = None) -> None:
        calls = call.count if count is None else count
        if calls <= 0:
            return
        self.calls += calls
        endpoint = call.endpoint
        self.called.setdefault((endpoint.model, endpoint.api_base, endpoint.api_key_env),
                               (endpoint, call.use))
        self.tokens_in += calls * call.tokens_in
        self.tokens_out += calls * call.tokens_out
        prices = caller.prices(call.endpoint)
        if prices is None:
            self.unpriced.setdefault(call.endpoint.model, call.use)
            self.cost_usd = None
        elif self.cost_usd is not None:
            usage = TokenUsage(call.tokens_in, call.tokens_out)
            self.cost_usd += calls * call_cost_usd(usage, prices)


async def _expected_out(tally: _Tally, caller: ModelCaller, endpoint: Endpoint, kind: str,
                        family: str, settings: Settings) -> int:
    """Completion tokens expected of a call: its family's recent mean, at most its
    ``max_tokens``; without a mean, its ``max_tokens``, else ``estimate_output_tokens``."""
    key = caller.lengths_key(endpoint, kind, family)
    if key not in tally.lengths:
        mean = await caller.cache.mean_length(key)
        limit = max_tokens(endpoint)
        learned = None if mean is None else max(1, round(mean))
        if learned is None:
            tally.lengths[key] = limit or settings.estimate_output_tokens
        else:
            tally.lengths[key] = learned if limit is None else min(limit, learned)
    return tally.lengths[key]


async def estimate_config(config: Config, root: Path, caller: ModelCaller,
                          with_base: bool = True) -> Estimate:
    """Estimate the run of ``config`` at ``root`` (see the module docstring).

    Raises:
        ConfigError: a dataset, prompt or trap file is missing or invalid.
    """
    return await estimate_configs([config], root, caller, with_base)


async def estimate_configs(configs: Sequence[Config], root: Path, caller: ModelCaller,
                           with_base: bool = True,
                           judgings: Sequence[Judging] = ()) -> Estimate:
    """Estimate one run of several configs at ``root`` (worker/evals/run/runner.py
    `run_suites`): a target call two suites of the run share is answered once, so it is
    counted once (then as cached). A suite whose dataset is another checkout's (its
    ``contract_root``: base's examples for head's target) reads it there, and its examples
    head's prompt cannot be rendered for are not counted (they fail without a call).
    ``judgings`` are judge calls on given answers the run also makes (`Judging`); what the
    cache holds of them counts as cached.

    Raises:
        ConfigError: as `estimate_config`.
    """
    tally = _Tally()
    per_suite: dict[str, int] = {}
    for config in configs:
        for suite in config.suites:
            before = tally.calls + tally.cached
            await _count(tally, caller, await _suite(tally, suite, root, config, caller,
                                                     with_base))
            per_suite[suite.name] = per_suite.get(suite.name, 0) + tally.calls + tally.cached \
                - before
    before = tally.calls + tally.cached
    await _count(tally, caller, [await _judged(tally, j.judge, j.example, 1, caller, j.answer,
                                               j.use, configs[0].settings, cacheable=True)
                                 for j in judgings])
    if tally.calls + tally.cached > before:
        per_suite[""] = tally.calls + tally.cached - before
    cost = None if tally.cost_usd is None else round(tally.cost_usd, 6)
    return Estimate(CostEstimate(tally.calls, tally.tokens_in, tally.tokens_out, cost,
                                 tally.cached), tuple(tally.unpriced.values()),
                    tuple(per_suite.items()), tuple(tally.called.values()))


async def _count(tally: _Tally, caller: ModelCaller, calls: list[_Call]) -> None:
    """Tally calls, those the cache holds as cached (looked up at once)."""
    cached = await caller.cache.cached([key for call in calls for key in call.keys])
    position = 0
    for call in calls:
        hits = sum(cached[position:position + len(call.keys)])
        position += len(call.keys)
        tally.add_cached(caller, call.endpoint, call.use, hits)
        if call.prompt is not None and call.count > hits:
            call = replace(call, tokens_in=await tally.tokens(call.endpoint.model, call.prompt))
        tally.add(caller, call, call.count - hits)


async def _suite(tally: _Tally, suite: SuiteConfig, root: Path, config: Config,
                 caller: ModelCaller, with_base: bool) -> list[_Call]:
    """Tally the suite's target calls; return its judge and embedding calls (with the keys
    the cache may answer) for the caller to look up at once."""
    settings = config.settings
    contract = suite.contract_root or root
    examples = each_turn(load_suite_dataset(contract, suite))
    answers: list[str | None] = [None] * len(examples)
    answer_tokens = settings.estimate_output_tokens
    if isinstance(suite.target, ModelTarget):
        use = ModelUse(suite.target.model, config.path, suite.target.line, "the target")
        answers, answer_tokens = await _target(tally, suite.target, examples, root, settings,
                                               caller, use, suite.contract_root is not None)
    calls: list[_Call] = []
    for example, known in zip(examples, answers, strict=True):
        for spec in (*suite.assertions, *example.assertions):
            path = suite.dataset if spec in example.assertions else config.path
            calls += await _assertion(tally, spec, example, known, answer_tokens, settings,
                                      caller, with_base, path)
    if suite.traps is not None:
        for example, output, _ in load_traps(contract, suite.traps):
            for spec in suite.assertions:
                if spec.type in JUDGE_TYPES:
                    calls += await _judge(tally, spec, example, 1, settings, caller,
                                          output, config.path, cacheable=True)
    return calls


async def _target(tally: _Tally, target: ModelTarget, examples: tuple[Example, ...], root: Path,
                  settings: Settings, caller: ModelCaller,
                  use: ModelUse, foreign: bool) -> tuple[list[str | None], int]:
    """Tally the target's calls; return each example's cached answer (None: not cached, or
    not rendered) and the completion tokens expected of the others."""
    template = load_prompt(root, target.prompt)
    out_tokens = await _expected_out(tally, caller, target.endpoint, "chat",
                                     answer_family(target), settings)
    rendered = _rendered(template, examples, foreign)
    if target.tools:
        return [None if messages is None else await _agent(
            tally, target, example_id, messages, settings, caller, use, out_tokens)
            for example_id, messages in rendered], out_tokens
    sent = [(example_id, messages) for example_id, messages in rendered if messages is not None]
    keys = [caller.chat_key(target.endpoint, messages, "chat", target.version)
            for _, messages in sent]
    found = await caller.cached_answers(keys) if settings.repeats == 1 else [None] * len(keys)
    hits = iter(zip(keys, found, strict=True))
    answers: list[str | None] = []
    for example_id, messages in rendered:
        if messages is None:  # head's prompt cannot render base's example: failed, no call
            answers.append(None)
            continue
        key, hit = next(hits)
        if (key, example_id) in tally.seen:  # another suite of this run has it: answered once
            answers.append(None if hit is None else hit.text)
            continue
        tally.seen.add((key, example_id))
        if hit is not None:
            tally.add_cached(caller, target.endpoint, use, 1)
            answers.append(hit.text)
            continue
        tokens_in = await tally.tokens(target.model, messages)
        tally.add(caller, _Call(target.endpoint, settings.repeats, tokens_in, out_tokens, use))
        answers.append(None)
    return answers, out_tokens


async def _agent(tally: _Tally, target: ModelTarget, example_id: str,
                 messages: list[dict[str, str]], settings: Settings, caller: ModelCaller,
                 use: ModelUse, out_tokens: int) -> str | None:
    """Tally one example's agent steps: the cached ones, and ``repeats`` times the worst case
    of the others (every step up to ``max_steps``, each sending the conversation so far: the
    prompt, the tools and the earlier answers); return the final answer when it is cached."""
    known = await known_steps(target, messages, caller, settings.repeats == 1)
    first = caller.chat_key(agent_endpoint(target), messages, "chat", target.version)
    if (first, example_id) in tally.seen:  # another suite of this run has it: answered once
        return known.answer
    tally.seen.add((first, example_id))
    tally.add_cached(caller, target.endpoint, use, known.cached)
    if known.left:
        prompt = await tally.tokens(target.model, known.messages)
        mean_in = prompt + math.ceil(out_tokens * (known.left - 1) / 2)
        tally.add(caller, _Call(target.endpoint, settings.repeats * known.left, mean_in,
                                out_tokens, use))
    return known.answer


def _rendered(template: PromptTemplate, examples: tuple[Example, ...],
              foreign: bool) -> list[tuple[str, list[dict[str, str]] | None]]:
    """Each example's id and messages; on another checkout's examples (``foreign``), None for
    those that cannot be rendered (the run fails them without a call, worker/evals/run/runner.py).

    Raises:
        ConfigError: an example of the checkout's own dataset cannot be rendered.
    """
    found: list[tuple[str, list[dict[str, str]] | None]] = []
    for example in examples:
        try:
            found.append((example.id, render(template, example)))
        except ConfigError:
            if not foreign:
                raise
            found.append((example.id, None))
    return found


async def _assertion(tally: _Tally, spec: AssertionSpec, example: Example, known: str | None,
                     answer_tokens: int, settings: Settings, caller: ModelCaller,
                     with_base: bool, path: str) -> list[_Call]:
    placeholder = "x " * answer_tokens
    answer = placeholder if known is None else known
    cacheable = known is not None and settings.repeats == 1
    if spec.type in JUDGE_TYPES:
        return await _judge(tally, spec, example, settings.repeats, settings, caller, answer,
                            path, cacheable=cacheable)
    if spec.type == "trajectory_judge":  # its prompt holds the trace, unknown before the run
        return await _judge(tally, spec, example, settings.repeats, settings, caller, answer,
                            path, cacheable=False)
    if spec.type == "pairwise" and with_base:
        return await _judge(tally, spec, example, 2, settings, caller, answer + placeholder,
                            path, cacheable=False, kind="pairwise")
    if spec.type == "composite":
        return [call for sub in criterion_specs(spec) for call in await _judge(
            tally, sub, example, settings.repeats, settings, caller, answer, path,
            cacheable=cacheable)]
    if spec.type == "similar":
        return _similar(tally, spec, example, answer, settings, caller, path, cacheable)
    return []


def _similar(tally: _Tally, spec: AssertionSpec, example: Example, answer: str,
             settings: Settings, caller: ModelCaller, path: str, cacheable: bool) -> list[_Call]:
    own = "model" in spec.params
    endpoint = parse_endpoint(spec.params, _config_error, embedding=True) if own \
        else settings.embedding
    reference = spec.params.get("value", example.expected)
    if endpoint is None or local_embed.is_local(endpoint.model) or reference is None:
        return []
    texts = embed_texts(answer, reference)
    prompt = [{"role": "user", "content": t} for t in texts]
    use = ModelUse(endpoint.model, path, spec.line, "the embedding model of `similar`" if own
                   else "settings.embedding (used by `similar`)")
    keys = (caller.embed_key(endpoint, texts),) if cacheable else ()
    return [_Call(endpoint, settings.repeats, 0, 0, use, keys, prompt)]


def _config_error(message: str) -> ConfigError:
    return ConfigError("", None, message)


async def _judge(tally: _Tally, spec: AssertionSpec, example: Example, draws: int,
                 settings: Settings, caller: ModelCaller, answer: Any, path: str, *,
                 cacheable: bool, kind: str = "judge") -> list[_Call]:
    try:
        js = judge_spec(spec, settings.judge, _config_error)
    except ConfigError:
        return []  # no model: the run reports it where the judge runs
    if kind == "pairwise":
        js = replace(js, kind=PAIRWISE_TEMPLATE_VERSION)
    own = "model" in spec.params
    use = ModelUse(js.endpoint.model, path, spec.line, f"the judge of `{spec.type}`" if own
                   else f"settings.judge (used by `{spec.type}`)")
    return [await _judged(tally, js, example, draws, caller, answer, use, settings,
                          cacheable=cacheable, kind=kind)]


async def _judged(tally: _Tally, js: JudgeSpec, example: Example, draws: int,
                  caller: ModelCaller, answer: Any, use: ModelUse, settings: Settings, *,
                  cacheable: bool, kind: str = "judge") -> _Call:
    messages = judge_messages(js, example, answer)
    tokens_out = await _expected_out(tally, caller, js.endpoint, kind, js.version, settings)
    keys = tuple(caller.chat_key(js.endpoint, messages, kind, js.version, draw)
                 for draw in range(js.n)) if cacheable else ()
    return _Call(js.endpoint, draws * js.n, 0, tokens_out, use, keys, messages)
