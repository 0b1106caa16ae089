"""Run a config's suites with model targets, judges, repeats, the cache and the budget.

The engine (worker/evals/run/engine.py) hands its runs here. One `RunState` per run (one config at
one commit, or head's target on base's evaluation contract and on its own: `run_suites`)
holds the call path (`ModelCaller`: response cache, budget, concurrency, retries), the
command-target concurrency limit and the answers given so far (an example two suites of the
run share is answered once). A suite's dataset and scoring files are read at its
``contract_root`` when it has one (base's checkout), its target and prompt at the run's root.
Before any call, the run is estimated (worker/evals/run/estimate.py) and the estimate printed; a
run whose estimate exceeds ``settings.max_cost_usd`` does not start (its `RunResult` has no
suites and says why). Under a ``max_cost_usd``, a model without a known price that the run
will call (answers the cache holds count too: a cached answer never stands in for a call the
run could not make) is a `ConfigError` on the line of the target or assertion that calls it,
asking for ``pricing:``: its spending could not be bounded.
``max_duration`` counts from the end of the estimate, when the run is ready to send
(litellm's import, seconds in a fresh process, happens before).

A suite's examples are answered concurrently, each repeat an independent draw (no cache);
results are ordered by dataset line, then repeat. Suites run one after another in config order.
When the budget or time limit is reached, calls not yet sent are not sent: their examples are
unscored with error kind ``budget``, and the run and suite record why they stopped.

With `Looks` (``settings.sequential``, worker/pipeline/sequential.py) the examples are answered
in batches: every suite's examples in a fixed order that depends only on their ids
(`look_order`), ``count`` equal batches, and after each batch but the last ``decide`` is asked
whether the gate is settled; if so, no further call is made and the results hold the examples
answered so far. The estimate is the full run's; the spend is what was called.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from worker.errors import ConfigError
from worker.evals.config import (
    PromptTemplate,
    load_prompt,
    load_schema_file,
    load_suite_dataset,
    render,
)
from worker.evals.context import CallEvent, EvalContext, GateSide, RunPlan, ShardWork
from worker.evals.llm import Budget, BudgetExceeded, ModelCaller, context_cache
from worker.evals.llm_types import CostEstimate, RunUsage, TokenUsage
from worker.evals.run.agent_target import run_agent
from worker.evals.run.batch import run_batch
from worker.evals.run.conversation import chat_turns, merge_turns, run_conversation, turn_example
from worker.evals.run.estimate import Judging, ModelUse, estimate_configs
from worker.evals.run.model_target import run_model
from worker.evals.run.targets import run_command
from worker.evals.run.traps import judge_traps
from worker.evals.run.views import TargetViews, runs_commands
from worker.evals.score import (
    JUDGE_TYPES,
    Item,
    add_pairwise,
    apply_metrics,
    judge_spec,
    score_items,
    suite_metrics,
)
from worker.evals.serialize import to_jsonable
from worker.evals.types import (
    CONFIG_FILENAME,
    AssertionSpec,
    CommandTarget,
    Config,
    Example,
    ExampleResult,
    ModelTarget,
    RunResult,
    Settings,
    SuiteConfig,
    SuiteResult,
    TargetOutput,
)


class RunState:
    """The shared state of one run (see the module docstring).

    Attributes:
        answers: the target answers of this run by `answer_keys`: an example two suites of
            the run share (head's target on base's contract and on its own) is answered once.
        views: where its commands run: a view of the checkout without the eval data
            (worker/evals/run/views.py), removed when `run_suites` ends.
    """

    def __init__(self, settings: Settings, ctx: EvalContext | None = None) -> None:
        self.ctx = ctx or EvalContext()
        mode = self.ctx.cache.mode if settings.cache else "off"
        self.cache = context_cache(self.ctx.cache, mode)
        self.budget = Budget(settings.max_cost_usd, settings.max_duration_s,
                             self.ctx.timing.clock)
        self.caller = ModelCaller(settings, self.cache, self.budget, self.ctx)
        sides = self.ctx.gate.sides
        self.command_limit = sides.command_limit if sides is not None \
            else asyncio.Semaphore(settings.concurrency)
        self.answers: dict[tuple[str, int, str, str], TargetOutput] = {}
        self.views = TargetViews()
        self.sha = ""  # the commit of the run (`run_suites`), told to `GateSide.shards`


@dataclass(frozen=True)
class Looks:
    """Answer a run in batches and ask after each whether to go on (module docstring).

    Attributes:
        count: batches (2-10).
        decide: called with the runs so far (one per config, as `run_suites` returns them)
            and the 1-based look after each batch but the last; True stops the run.
    """

    count: int
    decide: Callable[[list[RunResult], int], Awaitable[bool]]


def look_key(example_id: str) -> str:
    """Return the sort key of an example in a sequential run: the SHA-256 of its id.

    The order depends only on the ids, never on an answer, so each batch is a fair sample of
    the dataset (dataset files are often sorted by topic).
    """
    return hashlib.sha256(example_id.encode("utf-8")).hexdigest()


def look_order(examples: Sequence[Example]) -> list[Example]:
    """Return the examples in the order of a sequential run (`look_key`)."""
    return sorted(examples, key=lambda e: look_key(e.id))


def look_part(examples: Sequence[Example], look: int, count: int) -> list[Example]:
    """Return the examples of batch ``look`` (1-based) of ``count``, in `look_order`."""
    ordered = look_order(examples)
    start, stop = (round(len(ordered) * k / count) for k in (look - 1, look))
    return ordered[start:stop]


async def run_suites(configs: Sequence[Config], root: Path, sha: str = "",
                     ctx: EvalContext | None = None, *,
                     with_base: bool = True, looks: Looks | None = None,
                     only: Mapping[str, frozenset[str]] | None = None,
                     state: RunState | None = None,
                     judgings: Sequence[Judging] = ()) -> list[RunResult]:
    """Run the suites of one or more configs on one checkout as one run (see the module docstring).

    One config is one commit's run. Several are head's target scored on base's evaluation
    contract and on its own (worker/evals/verdict/contract.py): they share one estimate, budget
    and answer memo, so an example both configs hold is answered once, and the budget and time
    limit (the first config's settings, which the others share: the run settings come from
    base) bound both. Each result's ``spend`` is the whole run's.

    Args:
        configs: the parsed configs, at least one; the first one's settings hold for the run.
        root: the checkout.
        sha: the commit at ``root`` ("" for a working tree).
        ctx: Redis, cache mode, clocks and printer; None for no cache and real time.
        with_base: whether a base run follows (counts ``pairwise`` calls in the estimate).
        looks: answer in batches and stop once ``looks.decide`` says so (`Looks`).
        only: suite -> example ids: answer only those, once more (`confirm_run`).
        state: the run's state, for a caller that makes more calls after it on the same
            budget and totals (a gate's judge calibration); None: a new one. Built from the
            first config's settings.
        judgings: judge calls the caller makes after the run on its budget, counted in the
            estimate (worker/evals/run/estimate.py `Judging`).

    Returns:
        One result per config, in order; all stopped alike when the estimate is over budget.

    Raises:
        ConfigError: a dataset, prompt, schema or trap file is missing or invalid, or a model
            the run will call has no known price under ``max_cost_usd``.
        ExecutionError: the view its commands run in cannot be built (`answer_examples`).
    """
    settings = configs[0].settings
    state = state or RunState(settings, ctx)
    state.sha = sha
    state.views.of_configs(configs, root)
    try:
        if only is not None:
            return await confirm_run(configs, root, sha, state, only)
        return await _run_suites(configs, root, state, with_base, looks, judgings)
    finally:
        state.views.close()


async def _run_suites(configs: Sequence[Config], root: Path, state: RunState, with_base: bool,
                      looks: Looks | None, judgings: Sequence[Judging]) -> list[RunResult]:
    """`run_suites` once its state is set: estimate, then answer and score (in looks)."""
    settings, sha = configs[0].settings, state.sha
    planned = await estimate_configs(configs, root, state.caller, with_base, judgings)
    estimate = planned.cost
    unpriced = tuple(use.model for use in planned.unpriced)
    state.caller.planned += estimate.calls  # what a provider's pace is said to cost
    if estimate.calls or estimate.cached_calls:
        state.ctx.observers.say(describe_estimate(sha, estimate, unpriced))
    state.ctx.observers.on_plan(RunPlan(sha, estimate.calls + estimate.cached_calls,
                                        planned.suites, state.ctx.gate.side))
    limit = settings.max_cost_usd
    if limit is not None and planned.unpriced:
        raise unpriced_error(planned.unpriced[0], limit)
    _started(state.ctx.gate)
    if not state.budget.started:  # a caller's state may have started its clock already
        state.budget.start()
    if limit is not None and estimate.cost_usd is not None and estimate.cost_usd > limit:
        reason = (f"not started: the estimate ${estimate.cost_usd:.4f} ({estimate.calls} calls) "
                  f"exceeds max_cost_usd ${limit:.4f}")
        state.budget.stopped = reason  # nor may a caller's calls after the run be sent
        return [RunResult(sha, {}, estimate=estimate, stopped=reason) for _ in configs]
    count = looks.count if looks is not None else 1
    runs: list[dict[str, SuiteResult]] = [{} for _ in configs]
    for look in range(1, count + 1):
        for config, suites in zip(configs, runs, strict=True):
            for suite in config.suites:
                suites[suite.name] = await run_suite(
                    suite, root, config.settings, state,
                    (look, count, suites.get(suite.name)) if looks is not None else None)
        found = [RunResult(sha, dict(suites), spend=state.caller.total, estimate=estimate,
                           stopped=state.budget.stopped) for suites in runs]
        if looks is None or look == count or await looks.decide(found, look):
            state.caller.suite = ""  # later calls on this state are of no suite
            return found
    raise AssertionError("the last look returns")


def _started(gate: GateSide) -> None:
    """Tell a gate's head that base's calls may start (worker/pipeline/sides.py)."""
    if gate.sides is not None and gate.side == "base":
        gate.sides.base_started.set()


async def confirm_run(configs: Sequence[Config], root: Path, sha: str, state: RunState,
                      only: Mapping[str, frozenset[str]]) -> list[RunResult]:
    """Answer the examples ``only`` names once more, as the next repeat, without the cache.

    The run of ``settings.statistics.confirm_flips`` (worker/pipeline/confirm.py): each chosen
    example gets one more independent draw, numbered ``settings.repeats`` (after the run's own
    repeats), under the run's budget and time limit; suites ``only`` does not name are left
    out. No estimate is printed (the caller says how many examples it re-runs).
    """
    state.budget.start()
    runs = []
    for config in configs:
        suites = {s.name: await run_suite(s, root, config.settings, state, only=only[s.name])
                  for s in config.suites if s.name in only}
        runs.append(RunResult(sha, suites, spend=state.caller.total,
                              stopped=state.budget.stopped))
    return runs


def unpriced_error(use: ModelUse, limit_usd: float) -> ConfigError:
    """Return the config error of a model without a known price under ``max_cost_usd``."""
    fix = use.what.split()[0] if use.what.startswith("settings.") else "it"
    return ConfigError(use.path, use.line, f"{use.what}: {use.model} has no known price "
                       f"(not in litellm's price table), so its spending under max_cost_usd "
                       f"${limit_usd:g} cannot be bounded: give {fix} `pricing: {{input: ..., "
                       "output: ...}` (USD per million tokens)")


def describe_estimate(sha: str, estimate: CostEstimate, unpriced: tuple[str, ...]) -> str:
    """Return the estimate as one line for logs and the CLI."""
    cost = "unknown" if estimate.cost_usd is None else f"${estimate.cost_usd:.4f}"
    where = f"at {sha[:7]}" if sha else "in the working tree"
    line = (f"estimate {where}: {estimate.calls} provider calls "
            f"({estimate.cached_calls} cached), ~{estimate.tokens_in} tokens in, "
            f"~{estimate.tokens_out} out, {cost}")
    return line + (f" (no price for {', '.join(unpriced)})" if unpriced else "")


async def run_suite(suite: SuiteConfig, root: Path, settings: Settings,
                    state: RunState | None = None,
                    part: tuple[int, int, SuiteResult | None] | None = None,
                    only: frozenset[str] | None = None) -> SuiteResult:
    """Run one suite: answer every example (``repeats`` times), score, judge traps, metrics.

    Args:
        suite, root, settings: the suite, the checkout and the run settings.
        state: the run's state (a new one when None).
        part: (look, looks, the result of the earlier looks or None) to answer only that
            batch (`look_part`) and return it with the earlier looks' examples.
        only: answer only these examples, once, as repeat ``settings.repeats`` and without
            the cache (`confirm_run`); no traps are judged.

    Raises:
        ConfigError: the dataset, prompt, schema or trap file is missing or invalid.
    """
    state = state or RunState(settings)
    before = state.caller.total
    state.caller.suite = suite.name  # named in each call's event (progress)
    contract = suite.contract_root or root  # where its dataset and scoring files are
    examples = load_suite_dataset(contract, suite)
    earlier = part[2] if part is not None else None
    if part is not None:
        examples = tuple(look_part(examples, part[0], part[1]))
    if only is not None:
        examples = tuple(e for e in examples if e.id in only)
    specs = tuple(load_schema_file(spec, contract) for spec in suite.assertions)
    results: list[ExampleResult] = list(earlier.examples) if earlier is not None else []
    use_cache = settings.repeats == 1 and only is None
    draws = range(settings.repeats) if only is None else range(settings.repeats,
                                                                 settings.repeats + 1)
    for repeat in draws:
        outputs = await answer(suite, examples, root, settings, state, use_cache, repeat)
        items = [Item(_schemas(e, contract), o, repeat, use_cache)
                 for e, o in zip(examples, outputs, strict=True)]
        results.extend(await _score(specs, items, contract, settings, state, suite.dataset))
    results.sort(key=lambda r: (r.line, r.repeat))
    if earlier is not None:
        traps = earlier.traps
    elif only is None:
        traps = (await judge_traps(suite, contract, settings, state.caller))[0]
    else:
        traps = None
    results, custom = await apply_metrics(suite.metrics, results, contract, settings)
    metrics = suite_metrics(results) | custom  # custom: worker/evals/score/custom_metrics.py
    if traps is not None and traps.total:
        metrics["judge_trap_accuracy"] = traps.caught / traps.total
    spend = difference(state.caller.total, before)
    if earlier is not None:
        spend = earlier.spend + spend
    return SuiteResult(suite.name, suite.dataset, tuple(results), metrics,
                       spend=spend, traps=traps,
                       judge_versions=_judge_versions(suite, settings),
                       stopped=state.budget.stopped)


def difference(after: RunUsage, before: RunUsage) -> RunUsage:
    """Return what was spent between two totals of the same caller."""
    tokens, spent = after.tokens, before.tokens
    return RunUsage(after.provider_calls - before.provider_calls,
                    after.cache_hits - before.cache_hits,
                    TokenUsage(tokens.input - spent.input, tokens.output - spent.output,
                               tokens.cached_input - spent.cached_input),
                    round(after.cost_usd - before.cost_usd, 12),
                    after.unpriced_calls - before.unpriced_calls)


async def _score(specs: tuple[AssertionSpec, ...], items: list[Item], contract: Path,
                 settings: Settings, state: RunState, dataset: str) -> list[ExampleResult]:
    """Score the items; a conversation's answered turns each as an item of its own, merged
    back into one result per example (worker/evals/run/conversation.py)."""
    flat: list[Item] = []
    spans: list[tuple[int, int | None]] = []
    for item in items:
        if not item.example.turns or not item.output.turns:  # one input, or nothing answered
            spans.append((len(flat), None))
            flat.append(item)
            continue
        start = len(flat)
        flat.extend(Item(_schemas(turn_example(item.example, k), contract), output,
                         item.repeat, item.use_cache)
                    for k, output in enumerate(item.output.turns, 1))
        spans.append((start, len(flat)))
    scored = await score_items(specs, flat, contract, settings, state.caller, dataset)
    return [scored[start] if stop is None else merge_turns(item.example, scored[start:stop],
                                                            item.output)
            for item, (start, stop) in zip(items, spans, strict=True)]


def _schemas(example: Example, root: Path) -> Example:
    if not any(s.type == "json_schema" and "file" in s.params for s in example.assertions):
        return example
    return replace(example, assertions=tuple(load_schema_file(s, root)
                                             for s in example.assertions))


def answer_keys(target: CommandTarget | ModelTarget, repeat: int,
                examples: Sequence[Example]) -> list[tuple[str, int, str, str]]:
    """Return what each example's answer depends on: the target, the draw, the example's id
    and its input and vars (all a target is given; never ``expected``)."""
    text = json.dumps(to_jsonable(target), sort_keys=True, default=str)
    return [(text, repeat, e.id, json.dumps([e.input, e.vars], sort_keys=True, default=str))
            for e in examples]


async def answer(suite: SuiteConfig, examples: tuple[Example, ...], root: Path,
                 settings: Settings, state: RunState, use_cache: bool,
                 repeat: int = 0) -> list[TargetOutput]:
    """Produce the target's output for every example, in order (draw ``repeat``).

    An example this run answered already (`RunState.answers`) is not answered again: it gets
    that answer with nothing spent.
    """
    keys = answer_keys(suite.target, repeat, examples)
    todo = {key: e for key, e in zip(keys, examples, strict=True) if key not in state.answers}
    fresh = await _answer(suite, tuple(todo.values()), root, settings, state, use_cache, repeat)
    for key, output in zip(todo, fresh, strict=True):
        state.answers[key] = replace(output, spend=RunUsage())
    given = dict(zip(todo, fresh, strict=True))
    return [given.get(key) or state.answers[key] for key in keys]


async def _answer(suite: SuiteConfig, examples: tuple[Example, ...], root: Path,
                  settings: Settings, state: RunState, use_cache: bool,
                  repeat: int = 0) -> list[TargetOutput]:
    """Answer ``examples`` on other workers when `GateSide.shards` takes them, else here."""
    shards = state.ctx.gate.shards
    if shards is not None and examples:
        hidden = state.views.hidden() if runs_commands(suite.target) else ()
        given = await shards.answer(ShardWork(suite.target, examples, root, state.sha,
                                              settings, use_cache, repeat,
                                              suite.contract_root is not None, hidden))
        if given is not None:
            for output in given:  # the run's totals and budget count the shards' calls
                state.caller.total = state.caller.total + output.spend
                state.budget.charge(output.spend.cost_usd)
                if isinstance(suite.target, CommandTarget):  # and commands' reported cost
                    charge_command(state, output)
            return given
    return await answer_examples(suite.target, examples, root, settings, state, use_cache,
                                 foreign=suite.contract_root is not None, suite_name=suite.name)


async def answer_examples(target: CommandTarget | ModelTarget, examples: tuple[Example, ...],
                          root: Path, settings: Settings, state: RunState, use_cache: bool, *,
                          foreign: bool = False, suite_name: str = "") -> list[TargetOutput]:
    """Answer every example with ``target`` in this process, in order (one draw).

    Used by `answer` and by a shard job (worker/gate/shards.py). ``foreign``: the examples are
    of base's dataset, so a prompt that cannot be rendered for one is that example's failure.
    ``suite_name`` names the suite in each command's `CallEvent` (progress per suite). Its
    commands (a command target's, an agent's tools) run in ``state.views``'s view of ``root``,
    without the eval data (worker/evals/run/views.py).

    Raises:
        ConfigError: the prompt is missing or invalid (and ``foreign`` is False).
        ExecutionError: the view of ``root`` cannot be built.
    """
    if not examples:
        return []
    cwd = await state.views.cwd(root, not state.sha) if runs_commands(target) else root
    if isinstance(target, CommandTarget):
        outputs = await _commands(target, examples, cwd, settings, state)
        for output in outputs:  # one command call per example that ran, at its reported cost
            if output.error_kind != "budget":
                cost_usd = max(output.cost_usd or 0.0, 0.0)
                state.ctx.observers.on_call(CallEvent("command", "", 1, 0, cost_usd,
                                                      state.ctx.gate.side, suite_name))
        return outputs
    template = load_prompt(root, target.prompt)
    return list(await asyncio.gather(*(
        _model(target, template, e, state, use_cache, foreign, (cwd, settings))
        for e in examples)))


def charge_command(state: RunState, output: TargetOutput) -> TargetOutput:
    """Charge a command target's self-reported cost (its output's ``"cost"``, USD:
    worker/evals/run/targets.py) to the run's budget and totals as soon as the command ends,
    as a model call's: a command that calls a model itself spends the same budget, and the
    next command is not run once it is reached (issue 31: the cost was reported, never
    charged, so ``max_cost_usd`` never stopped such a run). Returns ``output``."""
    cost_usd = max(output.cost_usd or 0.0, 0.0)
    if cost_usd > 0:
        state.budget.charge(cost_usd)
        state.caller.total = state.caller.total + RunUsage(cost_usd=cost_usd)
    return output


async def _model(target: ModelTarget, template: PromptTemplate, example: Example,
                 state: RunState, use_cache: bool, foreign: bool,
                 where: tuple[Path, Settings]) -> TargetOutput:
    """One model answer (an agent's, when the target has tools: worker/evals/run/agent_target.py,
    its tool commands run at ``where``'s checkout with its settings); on an example of another
    checkout's dataset (``foreign``: base's contract), a prompt that cannot be rendered for it
    is that example's failure."""
    async def call(turn: Example, messages: list[dict[str, Any]] | None = None) -> TargetOutput:
        if target.tools:
            return await run_agent(target, template, turn, state.caller, *where,
                                   use_cache=use_cache, messages=messages)
        return await run_model(target, template, turn, state.caller, use_cache=use_cache,
                               messages=messages)

    try:
        if example.turns:
            return await run_conversation(
                example, chat_turns(lambda turn: render(template, turn), call))
        return await call(example)
    except ConfigError as err:
        if not foreign:
            raise
        return TargetOutput(None, f"head's prompt cannot be rendered for this example of "
                            f"base's dataset: {err.message}", error_kind="target")


async def _commands(target: CommandTarget, examples: tuple[Example, ...], root: Path,
                    settings: Settings, state: RunState) -> list[TargetOutput]:
    if target.batch:
        conversation = next((e for e in examples if e.turns), None)
        if conversation is not None:
            raise ConfigError(CONFIG_FILENAME, None, f"example {conversation.id!r} (dataset line "
                              f"{conversation.line}) has `turns`: a conversation needs a "
                              "command target called per turn, not `batch: true`")
        async with state.command_limit:
            outputs = await run_batch(target, examples, root, settings)
        return [charge_command(state, output) for output in outputs]

    async def turn(example: Example, history: list[dict[str, Any]] | None = None
                   ) -> TargetOutput:
        try:
            state.budget.check()
        except BudgetExceeded as stop:
            return TargetOutput(None, f"not run: {stop}", error_kind="budget")
        return charge_command(state, await run_command(target, example, root, settings,
                                                       history))

    async def command(example: Example) -> TargetOutput:
        async with state.command_limit:
            if example.turns:
                return await run_conversation(example, turn)
            return await turn(example)

    return list(await asyncio.gather(*(command(e) for e in examples)))


def _judge_versions(suite: SuiteConfig, settings: Settings) -> tuple[str, ...]:
    def fail(message: str) -> ConfigError:
        return ConfigError(CONFIG_FILENAME, None, message)

    versions = []
    for spec in suite.assertions:
        if spec.type in JUDGE_TYPES:
            versions.append(judge_spec(spec, settings.judge, fail).version)
    return tuple(versions)


async def judge_pairs(config: Config, head: RunResult, base: RunResult | None,
                      ctx: EvalContext | None = None,
                      state: RunState | None = None) -> RunResult:
    """Run the ``pairwise`` judges of ``config`` on head against base
    (worker/evals/score/pairwise.py).

    ``state``: head's run state, so the step spends head's one budget (base's
    ``max_cost_usd`` and ``max_duration``), whose estimate counts its calls (``with_base``),
    and its calls are in head's totals (issue 31: with a budget of its own, head's side could
    spend about twice ``max_cost_usd``). None: a new state (a caller without a run, tests).

    Raises:
        ConfigError: a ``pairwise`` assertion without a judge model.
    """
    if base is None or not any(s.type == "pairwise" for suite in config.suites
                               for s in suite.assertions):
        return head
    state = state or RunState(config.settings, ctx)
    return await add_pairwise(config, head, base, state.caller)
