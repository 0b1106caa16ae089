"""Send model calls for a run: cache, budget, concurrency, retries and cost in one place.

Every model call of a run (targets, judges, embeddings) goes through one `ModelCaller`: it looks
the call up in the response cache, checks the budget, waits for one of ``settings.concurrency``
slots (held only while a request is in flight, not while backing off), retries by the policy
of worker/evals/retry.py, prices the answer (worker/evals/cost.py) and stores it. A call that
fails is returned as an error with the provider's message, never raised: the example errors,
the job goes on.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from worker.evals import llm, local_embed
from worker.evals.cache import ResponseCache
from worker.evals.context import CallEvent, EvalContext
from worker.evals.cost import Budget, BudgetExceeded, TokenPrices, call_cost_usd, prices_for
from worker.evals.llm_types import Endpoint, ErrorKind, Pricing, RunUsage, TokenUsage
from worker.evals.retry import ProviderError, with_retries
from worker.evals.types import Settings

#: The `CallEvent` kind of each cache kind (the rest keep their name: ``judge``, ``pairwise``).
EVENT_KINDS = {"chat": "model", "embed": "embeddings"}
#: Prices of in-process models (worker/evals/local_embed.py): free.
LOCAL_PRICES = TokenPrices(Decimal(0), Decimal(0), Decimal(0))


@dataclass(frozen=True)
class Answer:
    """An answered call.

    Attributes:
        text: the model's text ("" for embeddings).
        vectors: the embedding vectors (embeddings only), else ().
        usage: the answer's tokens (as first fetched, for a cache hit).
        latency_ms: the provider's time for the answer, as first fetched, milliseconds.
        cost_usd: what the answer costs at the model's prices (as first fetched), or None when
            the model has no known price.
        cached: True when it came from the response cache (then nothing was spent).
    """

    text: str
    usage: TokenUsage
    latency_ms: float
    cost_usd: float | None
    cached: bool = False
    vectors: tuple[tuple[float, ...], ...] = ()


@dataclass(frozen=True)
class CallOutcome:
    """The answer or the error of one call, and what it spent (retries included).

    ``error_field`` is `ProviderError.field`: the endpoint field to fix when no retry can fix
    the error, else "".
    """

    answer: Answer | None
    error: str | None
    error_kind: ErrorKind | None
    spend: RunUsage
    error_field: str = ""


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
        self.limiter = asyncio.Semaphore(settings.concurrency)
        self.total = RunUsage()
        self._prices: dict[tuple[str, Pricing | None], TokenPrices | None] = {}

    def prices(self, endpoint: Endpoint) -> TokenPrices | None:
        """Return (and remember) the prices of ``endpoint`` (0 for a ``local/`` model)."""
        key = (endpoint.model, endpoint.pricing)
        if key not in self._prices:
            self._prices[key] = LOCAL_PRICES if local_embed.is_local(endpoint.model) \
                else prices_for(endpoint)
        return self._prices[key]

    async def chat(self, endpoint: Endpoint, messages: list[dict[str, str]], *,
                   kind: str = "chat", version: str = "", draw: int = 0,
                   use_cache: bool = True) -> CallOutcome:
        """Answer a chat call from the cache or the provider.

        Args:
            endpoint: the model to call.
            messages: the rendered messages.
            kind: cache kind (``chat`` for targets, ``judge``, ``pairwise``).
            version: target or judge prompt version (part of the cache key).
            draw: the draw number of a quorum (independent answers are distinct keys).
            use_cache: False for repeats: neither read nor written.
        """
        key = self.cache.key(kind, {"model": endpoint.model, "api_base": endpoint.api_base,
                                    "params": endpoint.params, "messages": messages,
                                    "version": version, "draw": draw})

        async def send() -> Answer:
            reply = await llm.chat(endpoint, messages, self.settings.timeout_s)
            return self._priced(endpoint, reply.text, reply.usage, reply.latency_ms)

        what = (EVENT_KINDS.get(kind, kind), endpoint.model)
        return await self._call(key, send, use_cache, what)

    async def embed(self, endpoint: Endpoint, texts: list[str], *,
                    use_cache: bool = True) -> CallOutcome:
        """Embed ``texts`` (one call) from the cache or the provider.

        A ``local/<name>`` model's key also holds the digest of its directory
        (`local_embed.identity`), so a model swapped behind the name is not served old vectors.
        """
        key = self.cache.key("embed", {"model": endpoint.model, "api_base": endpoint.api_base,
                                       "params": endpoint.params, "texts": texts,
                                       **local_embed.identity(endpoint.model)})

        async def send() -> Answer:
            reply = await llm.embed(endpoint, texts, self.settings.timeout_s)
            answer = self._priced(endpoint, "", reply.usage, reply.latency_ms)
            vectors = tuple(tuple(v) for v in reply.vectors)
            return Answer("", answer.usage, answer.latency_ms, answer.cost_usd, False, vectors)

        return await self._call(key, send, use_cache, ("embeddings", endpoint.model))

    def _priced(self, endpoint: Endpoint, text: str, usage: TokenUsage,
                latency_ms: float) -> Answer:
        prices = self.prices(endpoint)
        cost = call_cost_usd(usage, prices) if prices is not None else None
        return Answer(text, usage, latency_ms, cost)

    async def _call(self, key: str, send: Any, use_cache: bool,
                    what: tuple[str, str]) -> CallOutcome:
        if use_cache:
            hit = await self.cache.get(key)
            answer = _from_cache(hit) if hit is not None else None
            if answer is not None:
                hit_outcome = CallOutcome(answer, None, None, RunUsage(cache_hits=1))
                return self._account(what, hit_outcome)
        sent = 0

        async def attempt() -> Answer:
            nonlocal sent
            async with self.limiter:
                self.budget.check()  # the run may have stopped while this call waited
                sent += 1
                result: Answer = await send()
                return result

        try:
            answer = await with_retries(attempt, self.settings.retry, sleep=self.ctx.sleep,
                                        rng=self.ctx.rng, before_attempt=self.budget.check)
        except BudgetExceeded as stop:
            return self._account(what, CallOutcome(None, f"not sent: {stop}", "budget",
                                             RunUsage(provider_calls=sent)))
        except ProviderError as err:
            return self._account(what, CallOutcome(None, describe(err), err.kind,
                                             RunUsage(provider_calls=sent), err.field))
        self.budget.charge(answer.cost_usd or 0.0)
        if use_cache:
            await self.cache.put(key, _to_cache(answer))
        spend = RunUsage(provider_calls=sent, tokens=answer.usage,
                         cost_usd=answer.cost_usd or 0.0,
                         unpriced_calls=int(answer.cost_usd is None))
        return self._account(what, CallOutcome(answer, None, None, spend))

    def _account(self, what: tuple[str, str], outcome: CallOutcome) -> CallOutcome:
        self.total = self.total + outcome.spend
        spend = outcome.spend
        self.ctx.on_call(CallEvent(what[0], what[1], spend.provider_calls, spend.cache_hits,
                                   spend.cost_usd))
        return outcome


def _to_cache(answer: Answer) -> dict[str, Any]:
    return {"text": answer.text, "usage": [answer.usage.input, answer.usage.output,
                                           answer.usage.cached_input],
            "latency_ms": answer.latency_ms, "cost_usd": answer.cost_usd,
            "vectors": [list(v) for v in answer.vectors]}


def _from_cache(value: dict[str, Any]) -> Answer | None:
    try:
        tokens = TokenUsage(*(int(n) for n in value["usage"]))
        cost = value["cost_usd"]
        return Answer(str(value["text"]), tokens, float(value["latency_ms"]),
                      None if cost is None else float(cost), True,
                      tuple(tuple(float(x) for x in v) for v in value.get("vectors", [])))
    except (KeyError, TypeError, ValueError):
        return None  # an entry of another format: a miss
