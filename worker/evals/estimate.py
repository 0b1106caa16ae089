"""Estimate a run's provider calls, tokens and USD before it sends any.

Per suite: the model target answers every example ``repeats`` times (its prompt tokens counted
with litellm's tokenizer for the model, for the first `TOKENIZED_SAMPLE` prompts, and from the
length of the others at the same tokens per character; its completion tokens taken as the call's
``max_tokens``, else ``settings.estimate_output_tokens``); each ``llm_judge`` judges every answer
``n`` times (prompt: the judge template with the input, the reference and an answer of the
estimated length); each ``similar`` makes one embeddings call per answer; traps add one judge
call per trap, judge and draw; ``pairwise`` adds two judge calls per example (when a base
runs). An in-process ``local/<name>`` embedding model (worker/evals/local_embed.py) is no
provider call and costs nothing, so it is not counted (like a command target's runs). Target
calls the response cache already answers (same key, cache mode ``use``, no repeats) are counted
as cached and cost nothing. USD uses the prices of worker/evals/cost.py; it is None when a model
has no known price. It is an estimate: judge replies and answers are usually shorter than their
limit, so it tends to be high.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from worker.evals import llm, local_embed
from worker.evals.cost import call_cost_usd
from worker.evals.dataset import load_dataset
from worker.evals.endpoints import parse_endpoint
from worker.evals.judges import judge_messages, judge_spec
from worker.evals.llm_types import CostEstimate, Endpoint, TokenUsage
from worker.evals.prompts import PromptTemplate, load_prompt, render
from worker.evals.provider import ModelCaller
from worker.evals.traps import load_traps
from worker.evals.types import (
    AssertionSpec,
    Config,
    ConfigError,
    Example,
    ModelTarget,
    Settings,
    SuiteConfig,
)

#: Prompts of a model counted with its tokenizer; the rest are estimated from their length at
#: the tokens-per-character ratio of those (tokenizing every prompt of a large suite costs
#: about as much time as the run it estimates).
TOKENIZED_SAMPLE = 20


@dataclass
class _Tally:
    calls: int = 0
    cached: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = 0.0
    unpriced: set[str] = field(default_factory=set)
    sampled: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    seen: set[tuple[str, str]] = field(default_factory=set)  # (call key, example id) counted

    def tokens(self, model: str, messages: list[dict[str, str]]) -> int:
        """Count a prompt's tokens: exactly for the first prompts of a model, then by ratio."""
        chars = sum(len(m.get("content", "")) for m in messages) + 1
        count, tokens, seen = self.sampled.get(model, (0, 0, 0))
        if count < TOKENIZED_SAMPLE:
            exact = llm.count_tokens(model, messages)
            self.sampled[model] = (count + 1, tokens + exact, seen + chars)
            return exact
        return round(chars * tokens / seen)

    def add(self, caller: ModelCaller, endpoint: Endpoint, calls: int, tokens_in: int,
            tokens_out: int) -> None:
        self.calls += calls
        self.tokens_in += calls * tokens_in
        self.tokens_out += calls * tokens_out
        prices = caller.prices(endpoint)
        if prices is None:
            self.unpriced.add(endpoint.model)
            self.cost_usd = None
        elif self.cost_usd is not None:
            self.cost_usd += calls * call_cost_usd(TokenUsage(tokens_in, tokens_out), prices)


def _out_tokens(endpoint: Endpoint, settings: Settings) -> int:
    limit = endpoint.params.get("max_tokens", endpoint.params.get("max_completion_tokens"))
    return limit if isinstance(limit, int) and limit > 0 else settings.estimate_output_tokens


async def estimate_config(config: Config, root: Path, caller: ModelCaller,
                          with_base: bool = True) -> tuple[CostEstimate, tuple[str, ...]]:
    """Estimate the run of ``config`` at ``root`` (see the module docstring).

    Returns:
        The estimate and the models without a known price.

    Raises:
        ConfigError: a dataset, prompt or trap file is missing or invalid.
    """
    return await estimate_configs([config], root, caller, with_base)


async def estimate_configs(configs: Sequence[Config], root: Path, caller: ModelCaller,
                           with_base: bool = True) -> tuple[CostEstimate, tuple[str, ...]]:
    """Estimate one run of several configs at ``root`` (worker/evals/runner.py
    `run_configs`): a target call two suites of the run share is answered once, so it is
    counted once (then as cached). A suite whose dataset is another checkout's (its
    ``contract_root``: base's examples for head's target) reads it there, and its examples
    head's prompt cannot be rendered for are not counted (they fail without a call).

    Raises:
        ConfigError: as `estimate_config`.
    """
    tally = _Tally()
    for config in configs:
        for suite in config.suites:
            await _suite(tally, suite, root, config.settings, caller, with_base)
    cost = None if tally.cost_usd is None else round(tally.cost_usd, 6)
    return (CostEstimate(tally.calls, tally.tokens_in, tally.tokens_out, cost, tally.cached),
            tuple(sorted(tally.unpriced)))


async def _suite(tally: _Tally, suite: SuiteConfig, root: Path, settings: Settings,
                 caller: ModelCaller, with_base: bool) -> None:
    contract = suite.contract_root or root
    examples = load_dataset(contract, suite.dataset)
    answer_tokens = settings.estimate_output_tokens
    if isinstance(suite.target, ModelTarget):
        answer_tokens = await _target(tally, suite.target, examples, root, settings, caller,
                                      suite.contract_root is not None)
    for example in examples:
        for spec in (*suite.assertions, *example.assertions):
            _assertion(tally, spec, example, answer_tokens, settings, caller, with_base)
    if suite.traps is not None:
        for example, output in load_traps(contract, suite.traps):
            for spec in suite.assertions:
                if spec.type == "llm_judge":
                    _judge(tally, spec, example, 1, settings, caller, str(output))


async def _target(tally: _Tally, target: ModelTarget, examples: tuple[Example, ...], root: Path,
                  settings: Settings, caller: ModelCaller, foreign: bool) -> int:
    template = load_prompt(root, target.prompt)
    out_tokens = _out_tokens(target.endpoint, settings)
    rendered = _rendered(template, examples, foreign)
    keys = [caller.cache.key("chat", {
        "model": target.model, "api_base": target.endpoint.api_base,
        "params": target.endpoint.params, "messages": messages, "version": target.version,
        "draw": 0}) for _, messages in rendered]
    hits = await caller.cache.cached(keys) if settings.repeats == 1 else [False] * len(keys)
    for key, (example_id, messages), hit in zip(keys, rendered, hits, strict=True):
        if (key, example_id) in tally.seen:  # another suite of this run has it: answered once
            continue
        tally.seen.add((key, example_id))
        if hit:
            tally.cached += 1
            continue
        tokens_in = tally.tokens(target.model, messages)
        tally.add(caller, target.endpoint, settings.repeats, tokens_in, out_tokens)
    return out_tokens


def _rendered(template: PromptTemplate, examples: tuple[Example, ...],
              foreign: bool) -> list[tuple[str, list[dict[str, str]]]]:
    """Each example's id and messages; on another checkout's examples (``foreign``), those
    that cannot be rendered are left out (the run fails them without a call,
    worker/evals/runner.py).

    Raises:
        ConfigError: an example of the checkout's own dataset cannot be rendered.
    """
    found = []
    for example in examples:
        try:
            found.append((example.id, render(template, example)))
        except ConfigError:
            if not foreign:
                raise
    return found


def _assertion(tally: _Tally, spec: AssertionSpec, example: Example, answer_tokens: int,
               settings: Settings, caller: ModelCaller, with_base: bool) -> None:
    placeholder = "x " * answer_tokens
    if spec.type == "llm_judge":
        _judge(tally, spec, example, settings.repeats, settings, caller, placeholder)
    elif spec.type == "pairwise" and with_base:
        _judge(tally, spec, example, 2, settings, caller, placeholder + placeholder)
    elif spec.type == "similar":
        endpoint = parse_endpoint(spec.params, _config_error, embedding=True) \
            if "model" in spec.params else settings.embedding
        if endpoint is not None and not local_embed.is_local(endpoint.model):
            tokens = answer_tokens + len(str(example.expected or "")) // 4
            tally.add(caller, endpoint, settings.repeats, tokens, 0)


def _config_error(message: str) -> ConfigError:
    return ConfigError("", None, message)


def _judge(tally: _Tally, spec: AssertionSpec, example: Example, draws: int,
           settings: Settings, caller: ModelCaller, answer: str) -> None:
    try:
        js = judge_spec(spec, settings.judge, _config_error)
    except ConfigError:
        return  # no model: the run reports it where the judge runs
    messages = judge_messages(js, example, answer)
    tokens_in = tally.tokens(js.endpoint.model, messages)
    tally.add(caller, js.endpoint, draws * js.n, tokens_in, _out_tokens(js.endpoint, settings))
