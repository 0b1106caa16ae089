"""Value types of model targets, judges, retries, cost and usage (re-exported by `types`).

Plain frozen dataclasses with no I/O (a call's `Answer` and `CallOutcome` among them), the
error a provider call raises (`ProviderError`, retried by worker/evals/llm/retry.py) and
`ModelCalls`, the calls a scorer makes through its run's call path
(worker/evals/llm/provider.py). Money is USD (``_usd``), prices are USD per token
(``_per_token``) unless named per million tokens (``_per_mtok``), times are seconds (``_s``) or
milliseconds (``_ms``), shares are fractions 0-1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

#: Why an example errored (``ExampleResult.error_kind``): a call that did not give an answer,
#: ``rate_limited`` (429 after retries), ``provider`` (5xx, malformed answer, refused request),
#: ``timeout``, ``budget`` (not sent: ``max_cost_usd`` or ``max_duration`` reached); or a
#: failure of what was tested, scored as failed: ``target`` (a command target failed),
#: ``empty`` (the model's answer had no usable text: empty, null content, withheld by a content
#: filter, or cut at the token limit before any text; never cached), ``not_finite`` (an
#: assertion or metric value was NaN or infinite).
ErrorKind = Literal["rate_limited", "provider", "timeout", "budget", "target", "empty",
                    "not_finite"]
#: Error kinds that are not the model's fault: such examples are unscored, never failures.
UNSCORED_KINDS: tuple[str, ...] = ("rate_limited", "provider", "timeout", "budget")
#: ``use`` reads and writes the response cache, ``refresh`` only writes it, ``off`` neither.
CacheMode = Literal["use", "refresh", "off"]


@dataclass(frozen=True)
class Pricing:
    """Prices of one model, USD per million tokens (as providers publish them).

    Attributes:
        input_per_mtok: uncached prompt tokens.
        output_per_mtok: completion tokens.
        cached_input_per_mtok: prompt tokens served from the provider's prompt cache; None
            means they cost as much as uncached input.
        cache_write_per_mtok: prompt tokens written to the provider's prompt cache
            (Anthropic's ``cache_creation_input_tokens``, billed above input: 1.25x for a
            5-minute write); None means they cost as much as uncached input.
    """

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None


@dataclass(frozen=True)
class Endpoint:
    """Where and how a model is called (target, judge or embeddings).

    Attributes:
        model: a litellm model string, e.g. ``openai/gpt-4o-mini``.
        params: extra call parameters (``temperature``, ``max_tokens`` ...).
        api_base: base URL of an OpenAI-compatible proxy or local server, or None.
        api_key_env: name of the worker's environment variable holding the key, or None
            (litellm then reads the provider's usual variable).
        pricing: prices from the config, overriding litellm's price table, or None.
    """

    model: str
    params: dict[str, Any] = field(default_factory=dict)
    api_base: str | None = None
    api_key_env: str | None = None
    pricing: Pricing | None = None


@dataclass(frozen=True)
class ToolRequest:
    """One tool call a model asked for, as the OpenAI format gives it (litellm passes it on).

    Attributes:
        id: the call's id (``tool_call_id`` of the tool message that answers it).
        name: the function's name.
        arguments: the arguments as the model wrote them: JSON text, not always valid.
    """

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolCall:
    """One tool call of an agent's trace (worker/evals/score/traces.py reads them).

    Attributes:
        name: the tool's name.
        arguments: the arguments (a JSON value, usually an object; the model's text when it
            was not JSON).
        result: what the tool returned (a JSON value), None when it failed or was not given.
        error: why the call failed (unknown tool, invalid arguments, the tool's own error),
            None when it succeeded.
    """

    name: str
    arguments: Any = None
    result: Any = None
    error: str | None = None


@dataclass(frozen=True)
class Trace:
    """What an agent did for one example: its tool calls in order, and counts.

    Attributes:
        tool_calls: the calls in the order they were made.
        steps: model steps (calls of the model, one per answer or round of tool calls), or
            None when the target reported none.
        turns: conversation turns answered, or None.
        tokens: total tokens over the steps, or None.
        cost_usd: total cost in USD over the steps, or None.
    """

    tool_calls: tuple[ToolCall, ...] = ()
    steps: int | None = None
    turns: int | None = None
    tokens: int | None = None
    cost_usd: float | None = None


@dataclass(frozen=True)
class ToolSpec:
    """A tool a model target offers its model (``target.tools``), and how it is answered.

    Attributes:
        name: the function's name (``[A-Za-z0-9_-]{1,64}``, OpenAI's rule).
        description: what the tool does, shown to the model.
        parameters: the JSON Schema of its arguments, shown to the model.
        command: a command run per call (``{input_file}`` gets ``{"name", "arguments",
            "id"}``, ``{output_file}`` must get ``{"result": ...}`` or ``{"error": "..."}``),
            or None.
        results: a fixed table: ``(arguments, result)`` pairs; a call whose arguments equal
            one gets its result.
        default: the result of a call the table does not hold (when ``has_default``).
        has_default: whether ``default`` is set (a ``result:`` key; it may be null).
        line: 1-based line of the tool in the config.
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    command: str | None = None
    results: tuple[tuple[Any, Any], ...] = ()
    default: Any = None
    has_default: bool = False
    line: int | None = None


@dataclass(frozen=True)
class ModelTarget:
    """A target that renders a prompt per example and calls a model through litellm.

    Attributes:
        endpoint: the model and how to reach it.
        prompt: the prompt file relative to the repository root (POSIX): a jinja2 template
            (``.txt``/``.j2``/``.md``...) or a chat message list (``.yaml``/``.yml``/``.json``).
        version: a label the user bumps to invalidate cached answers ("" by default).
        line: 1-based line of the target in the config.
        lines: 1-based line of each endpoint field set in the config (``model``,
            ``api_base``, ``api_key_env`` ...), for annotations on the line that caused an
            error; not compared (moving a line changes no result).
        tools: the tools offered to the model (an agent: worker/evals/run/agent_target.py);
            () for a plain model target.
        max_steps: most model calls per example of an agent (default 8).
    """

    endpoint: Endpoint
    prompt: str
    version: str = ""
    line: int | None = None
    lines: dict[str, int] = field(default_factory=dict, compare=False)
    tools: tuple[ToolSpec, ...] = ()
    max_steps: int = 8

    @property
    def model(self) -> str:
        """The litellm model string."""
        return self.endpoint.model


class ProviderError(Exception):
    """A provider call failed.

    Attributes:
        kind: ``rate_limited`` (429), ``timeout`` or ``provider`` (anything else).
        message: the provider's message (never holds the API key), clipped.
        status: the HTTP status, or None (timeout, connection error).
        retryable: whether another attempt may succeed (429, 5xx, timeouts, connections).
        retry_after_s: seconds the provider asked to wait (``Retry-After``), or None.
        field: for an error no retry can fix, what to fix: ``api_key_env`` (a missing or
            refused key it names), ``api_base`` (refused by the worker), ``model`` (no such
            model or provider, or its key variable unset) or ``request`` (a prompt or
            parameters the provider refused: 400, 413, 422); "" for a transient error (429,
            5xx, timeouts, connections).
        headers: the answer's headers that pace calls (worker/evals/llm/pace.py:
            ``retry-after``, ``x-ratelimit-*``), lower-cased; {} without an answer.
    """

    def __init__(self, kind: ErrorKind, message: str, *, status: int | None = None,
                 retryable: bool = False, retry_after_s: float | None = None,
                 field: str = "", headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.status = status
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.field = field
        self.headers = headers or {}


@dataclass(frozen=True)
class RetrySettings:
    """Retries of provider calls (``settings.retry``).

    Attributes:
        max_retries: retries after the first attempt (default 2: three attempts in all).
        backoff_base_s: first backoff, seconds; doubled each retry, with full jitter.
        max_backoff_s: longest wait, seconds; a ``Retry-After`` above it fails the call at once.
    """

    max_retries: int = 2
    backoff_base_s: float = 0.5
    max_backoff_s: float = 60.0


@dataclass(frozen=True)
class TokenUsage:
    """Tokens of one call (or a sum of calls).

    Attributes:
        input: prompt tokens, cached and cache-written ones included (litellm's
            ``prompt_tokens``).
        output: completion tokens.
        cached_input: prompt tokens the provider served from its prompt cache.
        cache_write: prompt tokens the provider wrote to its prompt cache (Anthropic's
            ``cache_creation_input_tokens``; litellm's
            ``prompt_tokens_details.cache_write_tokens``).
    """

    input: int = 0
    output: int = 0
    cached_input: int = 0
    cache_write: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(self.input + other.input, self.output + other.output,
                          self.cached_input + other.cached_input,
                          self.cache_write + other.cache_write)

    def __sub__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(self.input - other.input, self.output - other.output,
                          self.cached_input - other.cached_input,
                          self.cache_write - other.cache_write)


@dataclass(frozen=True)
class RunUsage:
    """Provider use of a suite or a run: what the report's cost line shows.

    Attributes:
        provider_calls: calls sent to a provider (each retry counts once more).
        cache_hits: calls answered from llmgate's response cache (free, no provider time).
        tokens: tokens of the answered provider calls (cache hits excluded).
        cost_usd: USD spent on answered calls; failed calls are not billed.
        unpriced_calls: answered calls whose cost is unknown (not in cost_usd): a model without
            a known price, or an answer without ``usage`` (the budget charges those at their
            worst case, worker/evals/llm/provider.py).
    """

    provider_calls: int = 0
    cache_hits: int = 0
    tokens: TokenUsage = field(default_factory=TokenUsage)
    cost_usd: float = 0.0
    unpriced_calls: int = 0

    def __add__(self, other: RunUsage) -> RunUsage:
        return RunUsage(self.provider_calls + other.provider_calls,
                        self.cache_hits + other.cache_hits, self.tokens + other.tokens,
                        round(self.cost_usd + other.cost_usd, 12),
                        self.unpriced_calls + other.unpriced_calls)

    def __sub__(self, other: RunUsage) -> RunUsage:
        """What was used since ``other``, a total read earlier from the same caller."""
        return RunUsage(self.provider_calls - other.provider_calls,
                        self.cache_hits - other.cache_hits, self.tokens - other.tokens,
                        round(self.cost_usd - other.cost_usd, 12),
                        self.unpriced_calls - other.unpriced_calls)


@dataclass(frozen=True)
class CostEstimate:
    """What a run is expected to send before it starts (cached answers excluded).

    Attributes:
        calls: provider calls expected (targets and judges, times repeats and quorum).
        tokens_in, tokens_out: expected prompt and completion tokens.
        cost_usd: expected USD, or None when a model has no known price.
        cached_calls: calls the response cache already answers.
    """

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = 0.0
    cached_calls: int = 0


@dataclass(frozen=True)
class PairwiseResult:
    """The head-versus-base judgement of one example (both orders).

    Attributes:
        id: the example id.
        score: 1 win, 0.5 tie, 0 loss for head, or None when the judge errored.
        verdicts: the judge's pick in each order (``head``, ``base``, ``tie`` or ``error``).
        message: why it errored, else "".
    """

    id: str
    score: float | None
    verdicts: tuple[str, ...] = ()
    message: str = ""


@dataclass(frozen=True)
class TrapSummary:
    """How a suite's judge did on its trap cases (known-wrong outputs it must fail).

    Attributes:
        total: trap cases judged.
        caught: traps the judge failed, as it should.
        errors: traps whose judge call errored (not caught).
        missed_ids: ids of traps the judge passed or could not judge.
    """

    total: int
    caught: int
    errors: int = 0
    missed_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Answer:
    """An answered call.

    Attributes:
        text: the model's text ("" for embeddings).
        vectors: the embedding vectors (embeddings only), else ().
        usage: the answer's tokens (as first fetched, for a cache hit).
        latency_ms: the provider's time for the answer, as first fetched, milliseconds.
        cost_usd: what the answer costs at the model's prices (as first fetched), or None when
            the model has no known price or the answer reported no usage.
        cached: True when it came from the response cache (then nothing was spent).
        problem: why the answer has no usable text, "" when it has (never cached).
        charge_usd: what the budget is charged: ``cost_usd``, or the worst case when the cost
            is unknown (0 for a cache hit).
        tool_calls: the tool calls the model asked for, in order (a chat call with ``tools``).
        headers: the provider's headers that pace calls (never cached).
        replaced: lone surrogates of the provider's reply replaced by U+FFFD
            (`worker.evals.llm.client.ChatReply.replaced`; cached with the answer).
    """

    text: str
    usage: TokenUsage
    latency_ms: float
    cost_usd: float | None
    cached: bool = False
    vectors: tuple[tuple[float, ...], ...] = ()
    problem: str = ""
    charge_usd: float = 0.0
    tool_calls: tuple[ToolRequest, ...] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    replaced: int = 0


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


class ModelCalls(Protocol):
    """The model calls a scorer makes through its run's call path
    (worker/evals/llm/provider.py:ModelCaller, which the run hands to each scorer): the port
    judges, ``composite`` and ``similar`` call, without loading the call path themselves."""

    async def chat(self, endpoint: Endpoint, messages: list[dict[str, str]], *,
                   kind: str = "chat", version: str = "", draw: int = 0,
                   use_cache: bool = True, family: str | None = None) -> CallOutcome:
        """Answer a chat call (``kind``: its cache kind; ``version``: the prompt template's;
        ``draw``: which of a quorum's repeated calls) from the cache or the provider; a
        failure is returned as an error, never raised."""

    async def embed(self, endpoint: Endpoint, texts: list[str], *,
                    use_cache: bool = True) -> CallOutcome:
        """Embed ``texts`` (one call) from the cache or the provider; a failure is returned as
        an error, never raised."""
