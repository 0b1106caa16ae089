"""Prices, the cost of a call, and the budget that stops a run (``settings.max_cost_usd``).

A call's cost (USD) is ``(input - cached - written) * input_price + cached * cached_price +
written * cache_write_price + output * output_price``, prices per token: providers bill prompt
tokens served from their prompt cache at the cached rate and prompt tokens written to it at the
cache-write rate (OpenAI "Prompt caching" guide; Anthropic "Prompt caching" pricing: writes cost
1.25x input for 5 minutes, reads 0.1x). It is computed in decimal arithmetic so that, e.g., 1000
prompt tokens of which 800 cached and 200 completion tokens at $2 / $0.50 / $8 per million cost
exactly $0.0024. Prices come from the config's ``pricing`` when given, else from litellm's
bundled price table (``input_cost_per_token``, ``cache_read_input_token_cost``,
``cache_creation_input_token_cost``, ``output_cost_per_token``); a rate that is not given costs
as much as uncached input, never $0.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import Decimal

from worker.evals.llm import direct
from worker.evals.llm_types import Endpoint, Pricing, TokenUsage

_MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class TokenPrices:
    """USD per token (exact decimals) of uncached input, output, cached and cache-written
    input."""

    input: Decimal
    output: Decimal
    cached_input: Decimal
    cache_write: Decimal


def prices_from_pricing(pricing: Pricing) -> TokenPrices:
    """Convert per-million prices of the config to per-token prices."""

    def per_token(value: float | None) -> Decimal:
        return Decimal(str(pricing.input_per_mtok if value is None else value)) / _MILLION

    return TokenPrices(per_token(None), per_token(pricing.output_per_mtok),
                       per_token(pricing.cached_input_per_mtok),
                       per_token(pricing.cache_write_per_mtok))


def prices_for(endpoint: Endpoint) -> TokenPrices | None:
    """Return the prices of ``endpoint``: its ``pricing``, else litellm's table, else None."""
    if endpoint.pricing is not None:
        return prices_from_pricing(endpoint.pricing)
    entry = direct.price_table_entry(endpoint.model)
    if entry is None:
        return None
    input_price, output_price = entry.get("input_cost_per_token"), entry.get(
        "output_cost_per_token")
    if not isinstance(input_price, int | float) or not isinstance(output_price, int | float):
        return None

    def rate(key: str) -> Decimal:
        value = entry.get(key)
        return Decimal(repr(float(value if isinstance(value, int | float) else input_price)))

    return TokenPrices(rate("input_cost_per_token"), rate("output_cost_per_token"),
                       rate("cache_read_input_token_cost"),
                       rate("cache_creation_input_token_cost"))


def call_cost_usd(usage: TokenUsage, prices: TokenPrices) -> float:
    """Return the USD cost of one call's tokens (formula in the module docstring).

    Cached and cache-written tokens beyond the prompt count (a malformed usage) are capped at
    the prompt count, cached ones first.
    """
    cached = min(usage.cached_input, usage.input)
    written = min(usage.cache_write, usage.input - cached)
    total = ((usage.input - cached - written) * prices.input + cached * prices.cached_input
             + written * prices.cache_write + usage.output * prices.output)
    return float(total)


def max_tokens(endpoint: Endpoint) -> int | None:
    """Return the call's ``max_tokens`` (or ``max_completion_tokens``) parameter, or None."""
    params = endpoint.params
    limit = params.get("max_tokens", params.get("max_completion_tokens"))
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 \
        else None


def output_limit(endpoint: Endpoint, default: int) -> int:
    """Return the most completion tokens a call of ``endpoint`` may produce.

    Its `max_tokens`, else the model's ``max_output_tokens`` in litellm's price table, else
    ``default`` (``settings.estimate_output_tokens``, which is then an assumption, not a bound).
    """
    limit = max_tokens(endpoint)
    if limit is not None:
        return limit
    entry = direct.price_table_entry(endpoint.model)
    table = entry.get("max_output_tokens") if entry is not None else None
    return table if isinstance(table, int) and not isinstance(table, bool) and table > 0 \
        else default


#: Why the work of this task is no longer wanted (a sync question, asked before every call),
#: None for no one asking; set by the caller of a run around the task that runs it (`stopping`).
_STOP: ContextVar[Callable[[], str | None] | None] = ContextVar("llmgate_stop", default=None)


@contextmanager
def stopping(reason: Callable[[], str | None]) -> Iterator[None]:
    """Within the block, tasks created (they copy the context) stop their runs' calls once
    ``reason()`` gives one: `Budget.check` then refuses every further call and command, as
    when a limit is reached (issue 31: a run GitHub will never use the result of, its pull
    request closed or its merge group destroyed, kept sending calls until its task ended).
    ``reason`` must be cheap and must not raise (it is asked before every call): the caller
    polls Redis elsewhere (`worker.gate.supersede.supervise`)."""
    token = _STOP.set(reason)
    try:
        yield
    finally:
        _STOP.reset(token)


def stop_reason() -> str | None:
    """Return why the current task's work is no longer wanted (`stopping`), or None."""
    ask = _STOP.get()
    return None if ask is None else ask()


class BudgetExceeded(Exception):
    """No more calls may be sent: the message says which limit and how far the run got."""


class Budget:
    """The spending and time limits of one run, shared by all its calls (not thread-safe).

    Calls already in flight when a limit is reached still finish, so a run may overshoot
    ``max_cost_usd`` by at most ``concurrency`` calls. The time limit counts from `start`
    (the runner calls it once the run is ready to send its first call, so the one-time import
    of litellm and its tokenizers, seconds in a fresh process, is not the run's time).
    """

    def __init__(self, max_cost_usd: float | None, max_duration_s: float | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_cost_usd = max_cost_usd
        self.max_duration_s = max_duration_s
        self._clock = clock
        self.started_s = clock()
        self.started = False  # whether `start` was called (a run's clock starts once)
        self.spent_usd = Decimal(0)
        self.stopped: str | None = None

    def start(self) -> None:
        """Start (or restart) the time limit's clock now."""
        self.started_s = self._clock()
        self.started = True

    def charge(self, cost_usd: float) -> None:
        """Add the cost of an answered call, USD."""
        self.spent_usd += Decimal(repr(cost_usd))

    def remaining_s(self) -> float | None:
        """Seconds left before ``max_duration_s`` (0 when reached), or None without one."""
        if self.max_duration_s is None:
            return None
        return max(0.0, self.max_duration_s - (self._clock() - self.started_s))

    def check(self) -> None:
        """Raise `BudgetExceeded` when a limit is reached (and remember why).

        Raises:
            BudgetExceeded: ``spent >= max_cost_usd`` or ``elapsed >= max_duration_s``, or
                the run is no longer wanted (`stopping`: ``cancelled: <why>``).
        """
        if self.stopped is None and (cancelled := stop_reason()) is not None:
            self.stopped = f"cancelled: {cancelled}"
        if self.stopped is None:
            if self.max_cost_usd is not None and self.spent_usd >= Decimal(
                    repr(float(self.max_cost_usd))):
                self.stopped = (f"budget exceeded: ${float(self.spent_usd):.4f} spent of "
                                f"max_cost_usd ${self.max_cost_usd:.4f}")
            elapsed = self._clock() - self.started_s
            if self.stopped is None and self.max_duration_s is not None \
                    and elapsed >= self.max_duration_s:
                self.stopped = (f"time limit reached: {elapsed:.0f} s of max_duration "
                                f"{self.max_duration_s:g} s")
        if self.stopped is not None:
            raise BudgetExceeded(self.stopped)
