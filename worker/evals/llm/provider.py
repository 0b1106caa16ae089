"""Send model calls for a run: cache, budget, concurrency, retries and cost in one place.

Every model call of a run (targets, judges, embeddings) goes through one `ModelCaller`: it looks
the call up in the response cache, checks the budget, waits for one of ``settings.concurrency``
slots (held only while a request is in flight, not while backing off), retries by the policy
of worker/evals/llm/retry.py, prices the answer (worker/evals/llm/cost.py) and stores it. A call
that fails is returned as an error with the provider's message, never raised: the example errors,
the job goes on. In a gate whose sides run at once (`worker.evals.context.Sides`), the slots
are the gate's, and a head call the cache misses may first wait for base's fetch of it.

An answer without usable text (empty, null content, withheld by a content filter, cut at the
token limit before any text: `llm.answer_problem`) is returned as an error of kind ``empty``
naming that cause, and is never stored (nor read back, should an old entry hold one); what it
cost is still counted and charged. Cost is never assumed to be $0: an answer without ``usage``
is "cost unknown" (``cost_usd`` None, counted in ``unpriced_calls``) and the budget is charged
its worst case: the prompt's tokens counted with the model's tokenizer plus the most completion
tokens the call allows (`cost.output_limit`) at the model's prices. A call to a model without
a known price is not sent while ``max_cost_usd`` is set (the run refuses to start before that,
worker/evals/run/runner.py; this covers a cached answer that expired since the estimate).

A call that could not be sent (an ``api_base`` the worker refuses, an unset key variable, an
unpriced model under ``max_cost_usd``: `client.refusal`) gets that error before the cache is
looked at, so a cached answer never stands in for a call the run could not make (issue 30).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

from worker.evals.context import CallEvent, EvalContext
from worker.evals.llm import client as llm
from worker.evals.llm import local_embed
from worker.evals.llm.cache import ResponseCache
from worker.evals.llm.cost import (
    Budget,
    BudgetExceeded,
    TokenPrices,
    call_cost_usd,
    output_limit,
    prices_for,
)
from worker.evals.llm.pace import Quota, describe_pace, quota_for, refused_unit
from worker.evals.llm.retry import Patience, with_retries
from worker.evals.llm_types import (
    Answer,
    CallOutcome,
    Endpoint,
    Pricing,
    ProviderError,
    RunUsage,
    TokenUsage,
    ToolRequest,
)
from worker.evals.types import Settings

log = logging.getLogger("llmgate.llm")

#: The `CallEvent` kind of each cache kind (the rest keep their name: ``judge``, ``pairwise``).
EVENT_KINDS = {"chat": "model", "embed": "embeddings"}
#: How long a rate-limited call keeps trying when the run has no ``max_duration``, seconds.
RATE_LIMIT_PATIENCE_S = 900.0
#: Pace lines said at most per quota and run (`ModelCaller.announce`).
ANNOUNCE_MAX = 3
#: Refusals in a row after which a run says it keeps trying.
REFUSALS_TO_SAY = 10
#: Prices of in-process models (worker/evals/llm/local_embed.py): free.
LOCAL_PRICES = TokenPrices(Decimal(0), Decimal(0), Decimal(0), Decimal(0))


def describe(err: ProviderError) -> str:
    """Return a one-line error text: the kind, the HTTP status and the provider's message."""
    status = f" (HTTP {err.status})" if err.status is not None else ""
    label = {"rate_limited": "rate limited", "timeout": "timed out"}.get(err.kind,
                                                                          "provider error")
    return f"{label}{status}: {err.message}"


class ModelCaller:
    """The call path of one run (see the module docstring)."""

    def __init__(self, settings: Settings, cache: ResponseCache, budget: Budget,
                 ctx: EvalContext) -> None:
        self.settings = settings
        self.cache = cache
        self.budget = budget
        self.ctx = ctx
        self.limiter = ctx.gate.sides.limiter if ctx.gate.sides is not None \
            else asyncio.Semaphore(settings.concurrency)
        self.total = RunUsage()
        self.suite = ""  # the suite being run, named in each CallEvent
        self._prices: dict[tuple[str, Pricing | None], TokenPrices | None] = {}
        self._announced: dict[str, list[float]] = {}  # quota key -> the rates said (-1: refusals)
        self.planned = 0  # provider calls the run's estimate expects (`announce`)
        self.answered = 0  # calls answered by a provider so far
        self._refusals: dict[tuple[str, str | None, str | None], ProviderError | None] = {}

    def prices(self, endpoint: Endpoint) -> TokenPrices | None:
        """Return (and remember) the prices of ``endpoint`` (0 for a ``local/`` model)."""
        key = (endpoint.model, endpoint.pricing)
        if key not in self._prices:
            self._prices[key] = LOCAL_PRICES if local_embed.is_local(endpoint.model) \
                else prices_for(endpoint)
        return self._prices[key]

    def chat_key(self, endpoint: Endpoint, messages: list[dict[str, str]], kind: str = "chat",
                 version: str = "", draw: int = 0) -> str:
        """Return the response cache key of a chat call (arguments as `chat`'s)."""
        return self.cache.key(kind, {"model": endpoint.model, "api_base": endpoint.api_base,
                                     "params": endpoint.params, "messages": messages,
                                     "version": version, "draw": draw})

    def embed_key(self, endpoint: Endpoint, texts: list[str]) -> str:
        """Return the response cache key of an embeddings call (see `embed`)."""
        return self.cache.key("embed", {"model": endpoint.model, "api_base": endpoint.api_base,
                                        "params": endpoint.params, "texts": texts,
                                        **local_embed.identity(endpoint.model)})

    def lengths_key(self, endpoint: Endpoint, kind: str, family: str) -> str:
        """Return the key of the completion-token samples of a family of chat calls
        (worker/evals/llm/cache.py): its kind, model and ``family`` (see `chat`)."""
        return self.cache.lengths_key({"kind": kind, "model": endpoint.model, "family": family})

    async def cached_answers(self, keys: list[str]) -> list[Answer | None]:
        """Return the answer the response cache holds for each key (None: a miss)."""
        return [None if value is None else _from_cache(value)
                for value in await self.cache.lookup(keys)]

    async def chat(self, endpoint: Endpoint, messages: list[dict[str, str]], *,
                   kind: str = "chat", version: str = "", draw: int = 0,
                   use_cache: bool = True, family: str | None = None) -> CallOutcome:
        """Answer a chat call from the cache or the provider.

        Args:
            endpoint: the model to call.
            messages: the rendered messages.
            kind: cache kind (``chat`` for targets, ``judge``, ``pairwise``).
            version: target or judge prompt version (part of the cache key).
            draw: the draw number of a quorum (independent answers are distinct keys).
            use_cache: False for repeats: neither read nor written.
            family: what makes answers alike in length (a target's prompt file; by default
                ``version``, a judge's prompt version): the answer's completion tokens are kept
                as a sample of it (`lengths_key`) for the estimate.
        """
        # The keys serve the cache only: a call that neither reads nor writes it (repeats)
        # does not hash its messages.
        key = self.chat_key(endpoint, messages, kind, version, draw) if use_cache else ""
        lengths = self.lengths_key(endpoint, kind, version if family is None else family) \
            if use_cache else None

        async def send() -> Answer:
            reply = await llm.chat(endpoint, messages, self.settings.timeout_s)
            answer = self._priced(endpoint, reply.text, reply.usage, reply.latency_ms,
                                  lambda: llm.count_tokens(endpoint.model, messages))
            return replace(answer, problem=reply.problem, tool_calls=reply.tool_calls,
                           headers=reply.headers, replaced=reply.replaced)

        def charge() -> float:
            return float(llm.count_tokens(endpoint.model, messages)
                         + output_limit(endpoint, self.settings.estimate_output_tokens))

        what = (EVENT_KINDS.get(kind, kind), endpoint.model)
        return await self._call(key, send, use_cache, what, endpoint, lengths, charge)

    async def embed(self, endpoint: Endpoint, texts: list[str], *,
                    use_cache: bool = True) -> CallOutcome:
        """Embed ``texts`` (one call) from the cache or the provider.

        A ``local/<name>`` model's key also holds the digest of its directory
        (`local_embed.identity`), so a model swapped behind the name is not served old vectors.
        """
        key = self.embed_key(endpoint, texts) if use_cache else ""

        async def send() -> Answer:
            reply = await llm.embed(endpoint, texts, self.settings.timeout_s)
            answer = self._priced(endpoint, "", reply.usage, reply.latency_ms, lambda: sum(
                llm.count_tokens(endpoint.model, [{"role": "user", "content": t}]) for t in texts))
            return replace(answer, vectors=tuple(tuple(v) for v in reply.vectors),
                           headers=reply.headers)

        def charge() -> float:
            return float(sum(llm.count_tokens(endpoint.model, [{"role": "user", "content": t}])
                             for t in texts))

        return await self._call(key, send, use_cache, ("embeddings", endpoint.model), endpoint,
                                None, charge)

    def _priced(self, endpoint: Endpoint, text: str, usage: TokenUsage | None,
                latency_ms: float, prompt_tokens: Callable[[], int]) -> Answer:
        """Price an answer; without usage its cost is unknown and its charge the worst case:
        ``prompt_tokens()`` in and `output_limit` out (0 for a local or unpriced model)."""
        prices = self.prices(endpoint)
        if usage is None:
            worst = 0.0 if prices is None else call_cost_usd(TokenUsage(
                prompt_tokens(), output_limit(endpoint, self.settings.estimate_output_tokens)),
                prices)
            return Answer(text, TokenUsage(), latency_ms, None, charge_usd=worst)
        cost = call_cost_usd(usage, prices) if prices is not None else None
        return Answer(text, usage, latency_ms, cost, charge_usd=cost or 0.0)

    def _unpriced_under_budget(self, endpoint: Endpoint) -> str | None:
        if self.budget.max_cost_usd is None or self.prices(endpoint) is not None:
            return None
        return (f"not sent: {endpoint.model} has no known price and max_cost_usd is set "
                "(give the model `pricing: {input, output}`, USD per million tokens)")

    def _refused(self, endpoint: Endpoint, what: tuple[str, str]) -> CallOutcome | None:
        """Return the outcome of a call to ``endpoint`` that cannot be sent (`client.refusal`,
        remembered per model, ``api_base`` and key variable; or `_unpriced_under_budget`),
        else None."""
        ident = (endpoint.model, endpoint.api_base, endpoint.api_key_env)
        if ident not in self._refusals:
            self._refusals[ident] = llm.refusal(endpoint, os.environ)
            log.info("%s: calls go through %s", endpoint.model, llm.path_of(endpoint))
        err = self._refusals[ident]
        if err is not None:
            return self._account(what, CallOutcome(None, describe(err), err.kind, RunUsage(),
                                                   err.field))
        unpriced = self._unpriced_under_budget(endpoint)
        if unpriced is not None:
            return self._account(what, CallOutcome(None, unpriced, "budget", RunUsage()))
        return None

    async def _cached(self, key: str) -> Answer | None:
        hit = await self.cache.get(key)
        return _from_cache(hit) if hit is not None else None

    async def _call(self, key: str, send: Any, use_cache: bool, what: tuple[str, str],
                    endpoint: Endpoint, lengths: str | None = None,
                    charge: Callable[[], float] | None = None) -> CallOutcome:
        await llm.prepare(endpoint, sending=False)  # litellm off the loop, if its check needs it
        refused = self._refused(endpoint, what)
        if refused is not None:  # before the cache: no cached answer stands in for it
            return refused
        sides = self.ctx.gate.sides if use_cache else None
        if use_cache:
            answer = await self._cached(key)
            if answer is None and sides is not None and self.ctx.gate.side == "head" and \
                    await sides.before_head_sends(key, what[0] not in ("model", "command")):
                answer = await self._cached(key)  # what base fetched meanwhile
            if answer is not None:
                hit_outcome = CallOutcome(answer, None, None, RunUsage(cache_hits=1))
                return self._account(what, hit_outcome)
        await llm.prepare(endpoint, sending=True)  # a miss: litellm's path counts and sends
        if sides is None or self.ctx.gate.side != "base":
            return await self._send(key, send, use_cache, what, endpoint, lengths, charge)
        sides.fetching(key)  # head waits for it (Sides)
        try:
            return await self._send(key, send, use_cache, what, endpoint, lengths, charge)
        finally:
            sides.fetched(key)

    def quota(self, endpoint: Endpoint) -> Quota | None:
        """Return the provider quota ``endpoint``'s calls are paced by (None for a ``local/``
        model), shared through the context's Redis when it has one (worker/evals/llm/pace.py)."""
        if local_embed.is_local(endpoint.model):
            return None
        return quota_for(llm.quota_of(endpoint), self.ctx.cache.redis, self.ctx.timing.clock)

    async def _send(self, key: str, send: Any, use_cache: bool, what: tuple[str, str],
                    endpoint: Endpoint, lengths: str | None,
                    charge: Callable[[], float] | None = None) -> CallOutcome:
        quota = self.quota(endpoint)
        limit = 0 if what[0] == "embeddings" else output_limit(
            endpoint, self.settings.estimate_output_tokens)
        attempt = _Attempt(self, send, quota, endpoint, charge, limit)
        patience = None if quota is None else Patience(
            self.ctx.timing.clock, RATE_LIMIT_PATIENCE_S, lambda: describe_pace(quota.pace()))
        try:
            timing = self.ctx.timing
            answer = await with_retries(attempt.run, self.settings.retry, sleep=timing.sleep,
                                        rng=timing.rng, before_attempt=self.budget.check,
                                        patience=patience)
        except BudgetExceeded as stop:
            return self._account(what, CallOutcome(None, f"not sent: {stop}", "budget",
                                             RunUsage(provider_calls=attempt.sent)))
        except ProviderError as err:
            return self._account(what, CallOutcome(None, describe(err), err.kind,
                                             RunUsage(provider_calls=attempt.sent), err.field))
        self.budget.charge(answer.charge_usd)
        spend = RunUsage(provider_calls=attempt.sent, tokens=answer.usage,
                         cost_usd=answer.cost_usd or 0.0,
                         unpriced_calls=int(answer.cost_usd is None))
        if answer.problem:  # billed, but no answer: never cached
            return self._account(what, CallOutcome(None, answer.problem, "empty", spend))
        self.answered += 1
        if use_cache:
            sample = (lengths, answer.usage.output) if lengths and answer.usage.input else None
            await self.cache.put(key, _to_cache(answer), sample)
        return self._account(what, CallOutcome(answer, None, None, spend))

    def announce(self, quota: Quota, endpoint: Endpoint, waited_s: float) -> None:
        """Say when the provider's quota starts to set the pace of ``endpoint``'s calls (a
        call waited its turn), again when its rate halved or doubled since (at most
        `ANNOUNCE_MAX` times a run), and once when the provider refused `REFUSALS_TO_SAY`
        calls in a row (a run that only waits must not look frozen)."""
        pace = quota.pace()
        rate = pace.requests_per_s or pace.tokens_per_s
        said = self._announced.setdefault(quota.key, [])
        if quota.refused_in_row() >= REFUSALS_TO_SAY and -1.0 not in said:
            said.append(-1.0)
            patience = (f"max_duration {self.budget.max_duration_s:g} s"
                        if self.budget.max_duration_s is not None
                        else f"{RATE_LIMIT_PATIENCE_S:g} s after its first attempt")
            self.ctx.observers.say(
                f"{endpoint.model}: the provider refused {quota.refused_in_row()} calls in a "
                f"row (rate limited); each call is tried again until {patience}")
        spoken = [r for r in said if r > 0]
        if rate is None or waited_s <= 0 or len(spoken) >= ANNOUNCE_MAX or (
                spoken and spoken[-1] / 2 < rate < spoken[-1] * 2):
            return
        said.append(rate)
        left = self.planned - self.answered
        about = f": about {left / rate:.0f} s for the {left} calls left" \
            if pace.requests_per_s and left > 0 else ""
        self.ctx.observers.say(f"{endpoint.model}: {describe_pace(pace)}{about}")

    def _account(self, what: tuple[str, str], outcome: CallOutcome) -> CallOutcome:
        self.total = self.total + outcome.spend
        spend = outcome.spend
        self.ctx.observers.on_call(CallEvent(what[0], what[1], spend.provider_calls,
                                             spend.cache_hits, spend.cost_usd,
                                             self.ctx.gate.side, self.suite))
        return outcome


class _Attempt:
    """One attempt of a call: its turn of the provider's quota, then a concurrency slot, then
    the request; what the answer or the error says of the quota is learned."""

    def __init__(self, caller: ModelCaller, send: Any, quota: Quota | None, endpoint: Endpoint,
                 charge: Callable[[], float] | None, completion_limit: int = 0) -> None:
        self.caller, self.send, self.quota, self.endpoint = caller, send, quota, endpoint
        self.charge = charge
        #: the most completion tokens a call may produce: providers charge a token quota the
        #: prompt plus these when a request arrives, so answered calls count the same
        self.completion_limit = completion_limit
        self.sent = 0  # requests sent, retries included
        self.charged = 0.0  # the token charge reserved (0 while no token limit is known)

    def tokens(self) -> float:
        """The call's token charge: prompt tokens plus its most completion tokens."""
        self.charged = self.charge() if self.charge is not None else 0.0
        return self.charged

    async def take_turn(self, quota: Quota) -> int:
        """Wait for this call's turn of ``quota`` and return the quota's epoch then.

        Raises:
            ProviderError: rate limited, when the turn is further off than ``max_backoff``.
            BudgetExceeded: the run's budget or time ran out.
        """
        caller = self.caller
        caller.budget.check()
        limit_s = caller.settings.retry.max_backoff_s
        left_s = caller.budget.remaining_s()
        wait = await quota.turn(caller.ctx.timing.sleep, self.tokens,
                                limit_s if left_s is None else min(limit_s, left_s))
        if wait > limit_s:
            pace = describe_pace(quota.pace())
            raise ProviderError("rate_limited", f"not sent: the provider's quota is spent for "
                                f"{wait:.0f} s more, over max_backoff {limit_s:g} s"
                                + (f" ({pace})" if pace else ""), status=429)
        if left_s is not None and wait > left_s:  # the run's time limit comes first
            await caller.ctx.timing.sleep(max(0.0, left_s))
            caller.budget.check()
        caller.announce(quota, self.endpoint, wait)
        return quota.epoch()

    async def run(self) -> Answer:
        """Make one attempt (see the class docstring).

        Raises:
            ProviderError: the provider refused or failed it.
            BudgetExceeded: the run's budget or time ran out while it waited.
        """
        caller, quota = self.caller, self.quota
        epoch = None if quota is None else await self.take_turn(quota)  # outside the slot
        async with caller.limiter:
            if quota is not None and quota.epoch() != epoch:
                await self.take_turn(quota)  # learned meanwhile: what it waited for changed
            caller.budget.check()  # the run may have stopped while this call waited
            self.sent += 1
            try:
                result: Answer = await self.send()
            except ProviderError as err:
                if quota is not None:
                    await quota.heard(err.headers, _refused(err), self.charged,
                                      err.retry_after_s)
                raise
        if quota is not None:
            used = self.charged or float(result.usage.input + self.completion_limit)
            await quota.heard(result.headers, "", used)
        return result


def _refused(err: ProviderError) -> str:
    """Which provider limit a failed call hit (`pace.refused_unit`), "" when it hit none."""
    if err.kind != "rate_limited":
        return ""
    return refused_unit(err.message)


def _to_cache(answer: Answer) -> dict[str, Any]:
    return {"text": answer.text, "usage": [answer.usage.input, answer.usage.output,
                                           answer.usage.cached_input, answer.usage.cache_write],
            "latency_ms": answer.latency_ms, "cost_usd": answer.cost_usd,
            "vectors": [list(v) for v in answer.vectors],
            "tool_calls": [[c.id, c.name, c.arguments] for c in answer.tool_calls],
            **({"replaced": answer.replaced} if answer.replaced else {})}


def _from_cache(value: dict[str, Any]) -> Answer | None:
    try:
        tokens = TokenUsage(*(int(n) for n in value["usage"]))
        cost = value["cost_usd"]
        answer = Answer(str(value["text"]), tokens, float(value["latency_ms"]),
                        None if cost is None else float(cost), True,
                        tuple(tuple(float(x) for x in v) for v in value.get("vectors", [])),
                        tool_calls=tuple(ToolRequest(*(str(x) for x in c))
                                         for c in value.get("tool_calls", [])),
                        replaced=int(value.get("replaced", 0)))
    except (KeyError, TypeError, ValueError):
        return None  # an entry of another format: a miss
    # An answer without text (stored by an older llmgate) is no answer: a miss.
    return answer if answer.vectors or answer.text.strip() or answer.tool_calls else None
