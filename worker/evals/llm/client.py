"""The one module that imports litellm: one chat or embeddings call, prices, token counts.

A self-hosted OpenAI-compatible endpoint (``openai/<name>`` with ``api_base``, `direct.wire_model`)
is called without litellm (worker/evals/llm/direct.py: `direct_chat`, `direct_embed`); its
answers and failures are read here the same way as litellm's (`chat_reply`, `usage_of`,
`to_provider_error`), so both paths give the same replies and errors. Prices come from
litellm's price file without its import (`direct.price_table_entry`).

litellm is imported on first use (its import takes seconds), only when a call goes through it,
off the event loop (`load_litellm`, `prepare`), never by the web process, and set up once:
``LITELLM_LOCAL_MODEL_COST_MAP=True`` before the import so it reads its bundled price table
instead of fetching one from the network, its callbacks, telemetry and message logging off,
and its own retries off (``num_retries=0`` and ``max_retries=0`` for the OpenAI client):
llmgate retries itself (worker/evals/llm/retry.py), so one attempt here is exactly one HTTP
request. Every litellm exception becomes a `ProviderError` at once, and every answer our own
`ChatReply` or `EmbeddingReply`.

API keys come from the worker's environment only: an endpoint names a variable
(``api_key_env``), never a value. A custom ``api_base`` receives that key, so it must be on
loopback or start with one of the prefixes in the worker's ``LLMGATE_ALLOWED_API_BASES``
(comma-separated): a pull request cannot send the organisation's key to a server of its own.
An endpoint without ``api_key_env`` whose provider needs a key variable the worker lacks
(litellm's ``validate_environment``: ``ANTHROPIC_API_KEY`` for ``anthropic/...``) is refused
before any request, naming the variable, and so is a model string litellm knows no provider
for. These checks are also made before the response cache is asked (`refusal`): a cached
answer never stands in for a call the worker could not make. Errors no retry can fix carry
what to fix (`ProviderError.field`: ``api_key_env``, ``api_base``, ``model``, or ``request``
for a prompt or parameters the provider refused), so the gate can say which line of the
config caused them (worker/evals/verdict/causes.py).

CPU per call: litellm prices every answer and builds a logging payload for its callbacks; llmgate
prices answers itself (worker/evals/llm/cost.py) and registers no callback, so both are switched off
(`skip_unused_bookkeeping`), which cuts litellm's CPU per chat call by about a third. The
objects of the import (~200 MB) are then moved out of the garbage collector's reach
(`gc.freeze`): otherwise each full collection walks them all, a pause of ~0.25 s every few
hundred calls (~0.5 ms a call). Every call is sent from the run's own process; a large gate
spreads its calls over worker processes through its shards.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import ipaddress
import logging
import os
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

from worker.evals.llm import direct, guard, local_embed
from worker.evals.llm.pace import pace_headers, quota_key
from worker.evals.llm.retry import parse_retry_after
from worker.evals.llm_types import Endpoint, ProviderError, TokenUsage, ToolRequest
from worker.evals.serialize import valid_value

#: The worker variable listing the ``api_base`` prefixes (besides loopback) keys may go to.
ALLOWED_API_BASES_ENV = "LLMGATE_ALLOWED_API_BASES"
#: Longest provider message kept in an error, characters.
MAX_MESSAGE_CHARS = 500
#: The key variable litellm reads for an ``openai/`` model without ``api_key_env``.
OPENAI_KEY_ENV = "OPENAI_API_KEY"

_litellm: Any = None
_import_lock = threading.Lock()
T = TypeVar("T")


def litellm_module() -> Any:
    """Import litellm once, set up for offline prices and no side effects, and return it.

    Thread-safe: async code imports it through `load_litellm` (in a thread); callers that
    need it meanwhile wait for that one import.
    """
    if _litellm is None:
        with _import_lock:
            return _import_litellm()
    return _litellm


def litellm_loaded() -> bool:
    """Return whether litellm has been imported and set up in this process (`litellm_module`)."""
    return _litellm is not None


async def load_litellm() -> None:
    """Import litellm in a worker thread, off the event loop, unless it is imported already.

    Its import takes seconds of CPU (3-4 s idle, ~27 s at load 10): on the event loop it held a
    worker's loop past its lease (another worker then ran the same gate). Concurrent callers
    wait for the one import (`litellm_module`'s lock); afterwards this is a check of a global.
    """
    if _litellm is None:
        await asyncio.to_thread(litellm_module)


def needs_litellm(endpoint: Endpoint) -> bool:
    """Return whether ``endpoint``'s calls are sent through litellm: not a ``local/`` model
    and not the direct path (`direct.wire_model`)."""
    return not local_embed.is_local(endpoint.model) and direct.wire_model(endpoint) is None


def path_of(endpoint: Endpoint) -> str:
    """Say which path ``endpoint``'s calls take (docs/llm-suites.md, "Self-hosted endpoints:
    which path a call takes"): a local model, the direct client, or litellm."""
    if local_embed.is_local(endpoint.model):
        return "a local model, in this process"
    if direct.wire_model(endpoint) is not None:
        return (f"the direct client (a self-hosted OpenAI-compatible endpoint at "
                f"{endpoint.api_base}; litellm is not imported for it)")
    return "litellm" + (f" (api_base {endpoint.api_base})" if endpoint.api_base else "")


async def prepare(endpoint: Endpoint, *, sending: bool) -> None:
    """Import litellm off the event loop before a sync step needs it for ``endpoint``: the
    check of `refusal` (an endpoint of litellm's path without ``api_key_env``: its provider's
    key variable is looked up with litellm) or, with ``sending``, a call about to be sent
    through litellm (its token counts and the request). Nothing for the direct path, a
    ``local/`` model, or an import already done."""
    if _litellm is None and needs_litellm(endpoint) and (sending or endpoint.api_key_env is None):
        await load_litellm()


async def load_to_count(model: str) -> None:
    """Import litellm off the event loop when `count_tokens` needs it for ``model``."""
    if _litellm is None and not direct.unknown_openai_model(model):
        await load_litellm()


def _import_litellm() -> Any:
    global _litellm
    if _litellm is None:
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        os.environ.setdefault("LITELLM_TELEMETRY", "False")
        # pydantic warns about litellm's own types, at import and when litellm imports more
        warnings.filterwarnings("ignore", message=".*ReadOnly.*", category=UserWarning)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import litellm

        litellm.suppress_debug_info = True
        litellm.telemetry = False
        litellm.logging = False
        # No callback or logger receives messages (all off here); True would only add work.
        litellm.turn_off_message_logging = False
        litellm.callbacks = []
        litellm.success_callback = []
        litellm.failure_callback = []
        litellm._async_success_callback = []
        litellm._async_failure_callback = []
        litellm.num_retries = 0
        logging.getLogger("LiteLLM").setLevel(logging.WARNING)
        skip_unused_bookkeeping()
        gc.collect()  # nothing collectable gets frozen
        gc.freeze()  # Python's gc docs: frozen objects are ignored by future collections
        _litellm = litellm
    return _litellm


def skip_unused_bookkeeping() -> list[str]:
    """Switch off litellm's own pricing of answers and its success logging payload.

    llmgate prices every answer from its usage (worker/evals/llm/cost.py) and registers no litellm
    callback, so ``Logging.response_cost_calculator`` (litellm's price lookup, with model-name
    generalisation for unknown models) and ``Logging.async_success_handler`` (a payload built
    for callbacks) only cost CPU: about 2-3 ms of 8 per call on a 2-core machine (profiled with
    py-spy against tests/fakes/fake_llm.py). Replaced on the class, so every call skips them;
    a litellm without these methods is left as it is.

    Returns:
        The names of the methods replaced.
    """
    try:
        from litellm.litellm_core_utils.litellm_logging import Logging
    except ImportError:  # another litellm layout: nothing to skip
        return []
    replaced = []
    for name, skip in (("response_cost_calculator", _no_response_cost),
                       ("async_success_handler", _no_success_log)):
        if callable(getattr(Logging, name, None)):
            setattr(Logging, name, skip)
            replaced.append(name)
    return replaced


def _no_response_cost(self: Any, *args: Any, **kwargs: Any) -> None:
    return None


async def _no_success_log(self: Any, *args: Any, **kwargs: Any) -> None:
    return None


@dataclass(frozen=True)
class ChatReply:
    """One chat completion.

    Attributes:
        text: the answer's text ("" when it has none).
        usage: its tokens, or None when the answer reports no usage (cost unknown).
        latency_ms: the call's wall time, milliseconds.
        problem: why the answer has no usable text (`answer_problem`), "" when it has.
        tool_calls: the tool calls the model asked for (a request with ``tools``), in order;
            an answer with tool calls is usable without text.
        headers: the answer's headers that pace calls (`pace.pace_headers`: ``x-ratelimit-*``).
        replaced: how many lone surrogates of the provider's reply (in ``text`` and the tool
            calls) were replaced by U+FFFD (`send_chat`), 0 when it was valid Unicode.
    """

    text: str
    usage: TokenUsage | None
    latency_ms: float
    problem: str = ""
    tool_calls: tuple[ToolRequest, ...] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    replaced: int = 0


@dataclass(frozen=True)
class EmbeddingReply:
    """One embeddings call: a vector per input text, in order, its tokens (None: unknown) and
    the headers that pace calls (as `ChatReply`'s)."""

    vectors: list[list[float]]
    usage: TokenUsage | None
    latency_ms: float
    headers: Mapping[str, str] = field(default_factory=dict)


def answer_problem(content: Any, finish_reason: Any) -> str:
    """Return why a chat answer has no usable text, or "" when it has some (pure).

    Unusable: ``finish_reason`` ``content_filter`` (the provider withheld all or part of the
    answer, so what is left is not the model's answer), and any answer whose content is null,
    not text, empty or only whitespace (``length`` then means the token limit was reached
    before any text). A truncated answer with text (``length``) is usable.
    """
    reason = finish_reason if isinstance(finish_reason, str) and finish_reason else "none"
    if reason == "content_filter":
        return ("no usable text: the provider's content filter withheld the answer "
                "(finish_reason content_filter)")
    if isinstance(content, str) and content.strip():
        return ""
    what = "null content" if content is None else (
        "an empty answer" if isinstance(content, str) else "content that is not text")
    if reason == "length":
        return (f"no usable text: {what}, the token limit was reached before any text "
                "(finish_reason length: raise max_tokens)")
    return f"no usable text: {what} (finish_reason {reason})"


def check_api_base(api_base: str | None, environ: Mapping[str, str]) -> None:
    """Refuse an ``api_base`` the worker's keys must not be sent to.

    Allowed: None (the provider's own URL), an http(s) URL on loopback (``localhost``,
    127.0.0.0/8, ``::1``), or one starting with a prefix listed in `ALLOWED_API_BASES_ENV`.

    Raises:
        ProviderError: kind ``provider``, not retryable, field ``api_base``, naming the
            variable to set.
    """
    if api_base is None:
        return
    problem = _api_base_problem(api_base, environ.get(ALLOWED_API_BASES_ENV, ""))
    if problem is not None:
        raise ProviderError("provider", problem, field="api_base")


@functools.lru_cache(maxsize=256)
def _api_base_problem(api_base: str, allowed_setting: str) -> str | None:
    """Why ``api_base`` is refused under ``allowed_setting`` (the value of
    `ALLOWED_API_BASES_ENV`), or None; remembered, since every call asks (`check_api_base`)."""
    parts = urlsplit(api_base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"api_base {api_base!r} must be an http(s) URL"
    if _is_loopback(parts.hostname):
        return None
    allowed = [p.strip() for p in allowed_setting.split(",") if p.strip()]
    if not any(api_base.startswith(prefix) for prefix in allowed):
        return (f"api_base {api_base!r} is not allowed on this worker: "
                f"list it in {ALLOWED_API_BASES_ENV} (keys are sent there)")
    return None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def api_key(endpoint: Endpoint, environ: Mapping[str, str]) -> str | None:
    """Return the key named by ``endpoint.api_key_env`` from ``environ``, or None if unnamed.

    Raises:
        ProviderError: the named variable is not set on the worker (not retryable, field
            ``api_key_env``).
    """
    if endpoint.api_key_env is None:
        return None
    value = environ.get(endpoint.api_key_env)
    if not value:
        raise ProviderError("provider", f"the worker has no {endpoint.api_key_env} "
                            "(api_key_env names a variable of the worker's environment)",
                            field="api_key_env")
    return value


def check_provider(endpoint: Endpoint) -> None:
    """Refuse a model litellm knows no provider for, or whose provider's key is unset.

    litellm's ``get_llm_provider`` picks the provider of a model string (``nosuch/x`` has
    none); its ``validate_environment`` names the variables a provider reads (for
    ``anthropic/...``: ``ANTHROPIC_API_KEY``), checked only for an endpoint without
    ``api_key_env``. Only names ending in ``_API_KEY`` count: a provider that can also
    authenticate otherwise (AWS roles, Google's default credentials, Azure settings besides
    the key) is left to try. Both are local lookups (about 10 microseconds), made just before
    the request is sent (`send_chat`, `send_embed`).

    Raises:
        ProviderError: not retryable, field ``model``, naming the missing variables.
    """
    if local_embed.is_local(endpoint.model):
        return
    litellm = litellm_module()
    try:
        litellm.get_llm_provider(model=endpoint.model, api_base=endpoint.api_base)
    except Exception as exc:  # litellm's BadRequestError: no provider for this model string
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ProviderError("provider", f"litellm knows no provider for {endpoint.model!r} "
                            f"({first[:200]}): write it as provider/model, e.g. "
                            "openai/gpt-4o-mini", field="model") from None
    if endpoint.api_key_env is not None:
        return
    try:
        found = litellm.validate_environment(model=endpoint.model, api_base=endpoint.api_base)
        missing = [str(name) for name in found.get("missing_keys") or []]
    except Exception:  # an odd model string: litellm's own call reports it
        return
    if missing and all(name.endswith("_API_KEY") for name in missing):
        names = ", ".join(missing)
        raise ProviderError("provider", f"the worker has no {names}, which {endpoint.model} "
                            "needs: set it on the worker, or name the worker's variable "
                            "holding the key with api_key_env", field="model")


def refusal(endpoint: Endpoint, environ: Mapping[str, str]) -> ProviderError | None:
    """Return the error every call to ``endpoint`` would get before any request, else None.

    Asked before the response cache (worker/evals/llm/provider.py), so a cached answer never
    stands in for a call this worker could not make (issue 30: a head that renamed
    ``api_key_env`` to an unset variable was answered from base's cached answers). The checks
    are `chat`'s: ``api_base`` allowed (`check_api_base`), the ``api_key_env`` variable set
    (`api_key`) and, for an endpoint without ``api_key_env``, a provider litellm knows whose key
    variable is set (`check_provider`: it imports litellm). With ``api_key_env`` the model
    string is left to the request: it is part of every cache key, and only answers a provider
    gave are stored, so a hit's model was sendable. A ``local/`` model is never refused.
    Microseconds after litellm's import; pure but for litellm's reading of ``os.environ``.

    Returns:
        The `ProviderError` (not retryable, its field ``api_base``, ``api_key_env`` or
        ``model``), or None when the calls may be sent.
    """
    if local_embed.is_local(endpoint.model):
        return None
    try:
        check_api_base(endpoint.api_base, environ)
        if direct.wire_model(endpoint, environ) is not None:
            direct_key(endpoint, environ)
        elif endpoint.api_key_env is not None:
            api_key(endpoint, environ)
        else:
            check_provider(endpoint)
    except ProviderError as err:
        return blame(err, endpoint)
    return None


def direct_key(endpoint: Endpoint, environ: Mapping[str, str]) -> str:
    """Return the key of a direct-path call (worker/evals/llm/direct.py): the variable
    ``api_key_env`` names, else ``OPENAI_API_KEY``, the variable litellm's path reads for an
    ``openai/`` model (and requires, so this path requires it too).

    Raises:
        ProviderError: the variable is not set (not retryable; field ``api_key_env``, or
            ``model`` with `check_provider`'s message when no variable is named).
    """
    key = api_key(endpoint, environ)
    if key is not None:
        return key
    key = environ.get(OPENAI_KEY_ENV)
    if not key:
        raise ProviderError("provider", f"the worker has no {OPENAI_KEY_ENV}, which "
                            f"{endpoint.model} needs: set it on the worker, or name the "
                            "worker's variable holding the key with api_key_env", field="model")
    return key


def _endpoint_of(kwargs: dict[str, Any]) -> Endpoint:
    """The endpoint of `_call_kwargs`'s arguments, as far as `check_provider` needs it (a key
    given counts as a named variable)."""
    return Endpoint(str(kwargs.get("model", "")), api_base=kwargs.get("api_base"),
                    api_key_env="(given)" if kwargs.get("api_key") else None)


def blame(err: ProviderError, endpoint: Endpoint) -> ProviderError:
    """Return ``err`` with the endpoint field to fix when no retry can fix it (pure).

    A refused key (401, 403) is ``api_key_env``'s when the endpoint names one, else the
    model's (the provider it picks reads its own variable); a model the provider does not
    have (404) is the ``model``'s; any other refused request (400, 413, 422: a prompt or
    parameters the model refuses) is the ``request``'s. A retryable error, or one that
    already names a field, is returned as it is.
    """
    if err.retryable or err.field:
        return err
    if err.status in (401, 403):
        err.field = "api_key_env" if endpoint.api_key_env is not None else "model"
    else:
        err.field = "model" if err.status == 404 else "request"
    return err


def quota_of(endpoint: Endpoint) -> str:
    """Name the provider quota ``endpoint``'s calls draw on (`pace.quota_key`): its
    ``api_base`` (None: the provider's own), model and the key its ``api_key_env`` names (the
    key is only hashed; an unset variable counts as no key: the call then fails anyway)."""
    try:
        key = api_key(endpoint, os.environ)
    except ProviderError:
        key = None
    return quota_key(endpoint.api_base, endpoint.model, key)


def _call_kwargs(endpoint: Endpoint, timeout_s: float) -> dict[str, Any]:
    check_api_base(endpoint.api_base, os.environ)
    kwargs: dict[str, Any] = {**endpoint.params, "model": endpoint.model, "timeout": timeout_s,
                              "num_retries": 0, "max_retries": 0}
    key = api_key(endpoint, os.environ)
    if key is not None:
        kwargs["api_key"] = key
    if endpoint.api_base is not None:
        kwargs["api_base"] = endpoint.api_base
    return kwargs


async def chat(endpoint: Endpoint, messages: list[dict[str, str]], timeout_s: float) -> ChatReply:
    """Send one chat completion request from this process (one HTTP request, no retries).

    Args:
        endpoint: model, params, api_base and key variable.
        messages: OpenAI-style ``[{"role", "content"}]``.
        timeout_s: request timeout, seconds.

    Raises:
        ProviderError: the call failed or the answer has no text (see `to_provider_error`),
            with the field to blame when no retry can fix it (`blame`).
    """
    name = direct.wire_model(endpoint)
    if name is not None:
        return await direct_chat(endpoint, name, messages, timeout_s)

    async def here(kwargs: dict[str, Any]) -> ChatReply:
        await load_litellm()
        return await send_chat(kwargs, messages)

    return await _send(endpoint, timeout_s, "chat", here)


async def _send(endpoint: Endpoint, timeout_s: float, op: str,
                here: Callable[[dict[str, Any]], Awaitable[T]]) -> T:
    """Check and send one call of litellm's path: ``here`` with litellm's arguments
    (`_call_kwargs`: ``api_base`` allowed, the key); a `ProviderError` gets the field to blame
    (`blame`). The worker's check is asked first (`guard.before_call`: a try that lost its
    lease stops)."""
    await guard.before_call(f"{op} {endpoint.model}")
    try:
        return await here(_call_kwargs(endpoint, timeout_s))
    except ProviderError as err:
        raise blame(err, endpoint) from None


async def send_chat(kwargs: dict[str, Any], messages: list[dict[str, str]]) -> ChatReply:
    """Send one chat completion with litellm from this process (`chat` without the
    ``api_base`` check and the key lookup; `check_provider` runs here, just before the request).

    Args:
        kwargs: litellm's arguments as `chat` builds them (model, key, api_base, timeout).
        messages: OpenAI-style ``[{"role", "content"}]``.

    The reply is where a model's text enters llmgate: a lone surrogate in it (a JSON escape
    such as ``"\\ud800"`` in the provider's answer) is replaced by U+FFFD and counted in
    `ChatReply.replaced` (worker/evals/serialize.py), so the response cache, the reports and
    the baseline store all receive valid Unicode.

    Raises:
        ProviderError: the call failed (see `to_provider_error`), or `check_provider`
            refused it.
    """
    check_provider(_endpoint_of(kwargs))
    litellm = litellm_module()
    started = time.perf_counter()
    try:
        response = await litellm.acompletion(messages=messages, **kwargs)
        choice = response.choices[0]
        text, finish_reason = choice.message.content, getattr(choice, "finish_reason", None)
        calls = tool_requests(getattr(choice.message, "tool_calls", None))
    except ProviderError:
        raise
    except Exception as exc:  # litellm's and the SDK's exceptions: mapped at the edge
        raise to_provider_error(exc, kwargs.get("api_key")) from None
    latency_ms = (time.perf_counter() - started) * 1000
    return chat_reply(text, finish_reason, calls, usage_of(response), latency_ms,
                      headers_of(response))


def chat_reply(text: Any, finish_reason: Any, calls: tuple[ToolRequest, ...],
               usage: TokenUsage | None, latency_ms: float,
               headers: dict[str, str]) -> ChatReply:
    """Build the `ChatReply` of an answer's content, finish reason and tool calls, the same
    way on both paths: lone surrogates replaced (`send_chat`), the problem of an answer
    without usable text (`answer_problem`) unless it asks for tool calls."""
    text, replaced = valid_value(text)
    calls_valid, calls_replaced = valid_value([[c.id, c.name, c.arguments] for c in calls])
    return ChatReply(text if isinstance(text, str) else "", usage, latency_ms,
                     "" if calls else answer_problem(text, finish_reason),
                     tuple(ToolRequest(*call) for call in calls_valid), headers,
                     replaced + calls_replaced)


async def direct_chat(endpoint: Endpoint, name: str, messages: list[dict[str, str]],
                      timeout_s: float) -> ChatReply:
    """Send one chat completion to a self-hosted OpenAI-compatible server without litellm
    (worker/evals/llm/direct.py; ``name`` its `direct.wire_model`): the request litellm would
    send, the answer read as `send_chat` reads litellm's.

    Raises:
        ProviderError: as `chat`: the failure classified by `to_provider_error`, with the
            field to blame (`blame`).
    """
    def read(body: dict[str, Any]) -> tuple[Any, Any, tuple[ToolRequest, ...]]:
        choice = body["choices"][0]
        message = choice["message"]
        return (message.get("content"), choice.get("finish_reason"),
                tool_requests(message.get("tool_calls")))

    answer, (text, finish_reason, calls) = await _direct_call(
        endpoint, "chat", "chat/completions", {"model": name, "messages": messages}, timeout_s,
        read, "an OpenAI chat answer")
    return chat_reply(text, finish_reason, calls, usage_of(answer.body.get("usage")),
                      answer.latency_ms, pace_headers(answer.headers))


async def direct_embed(endpoint: Endpoint, name: str, texts: list[str],
                       timeout_s: float) -> EmbeddingReply:
    """Send one embeddings request to a self-hosted OpenAI-compatible server without litellm
    (as `direct_chat`).

    Raises:
        ProviderError: as `embed`.
    """
    def read(body: dict[str, Any]) -> list[list[float]]:
        vectors = [list(map(float, _field(item, "embedding"))) for item in body["data"]]
        if len(vectors) != len(texts):
            raise ProviderError("provider", f"expected {len(texts)} embeddings, got "
                                f"{len(vectors)}", retryable=True)
        return vectors

    answer, vectors = await _direct_call(
        endpoint, "embed", "embeddings", {"model": name, "input": texts}, timeout_s, read,
        "an OpenAI embeddings answer")
    return EmbeddingReply(vectors, usage_of(answer.body.get("usage")), answer.latency_ms,
                          pace_headers(answer.headers))


async def _direct_call(endpoint: Endpoint, op: str, path: str, body: dict[str, Any],
                       timeout_s: float, read: Callable[[dict[str, Any]], T],
                       what: str) -> tuple[direct.Answer, T]:
    """One direct request of `direct_chat` or `direct_embed`: the worker's check first (as
    `_send`: a lost lease stops here), ``api_base`` allowed, the key, the POST of ``body`` with
    the endpoint's params, and ``read`` of the answer's body; a failure, or a body that is not
    ``what``, is classified by `to_provider_error` and blamed on its field (`blame`)."""
    await guard.before_call(f"{op} {endpoint.model}")
    try:
        check_api_base(endpoint.api_base, os.environ)
        key = direct_key(endpoint, os.environ)
        try:
            answer = await direct.post(str(endpoint.api_base), path,
                                       {**_sent_params(endpoint), **body}, key, timeout_s)
            return answer, read(answer.body)
        except direct.DirectError as exc:
            raise to_provider_error(exc, key) from None
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise to_provider_error(direct.DirectError(
                f"not {what} ({type(exc).__name__}: {exc})", 500), key) from None
    except ProviderError as err:
        raise blame(err, endpoint) from None


def _sent_params(endpoint: Endpoint) -> dict[str, Any]:
    """The params litellm would send: those set to a value (litellm drops None)."""
    return {key: value for key, value in endpoint.params.items() if value is not None}


def headers_of(response: Any) -> dict[str, str]:
    """The headers of a litellm answer that pace calls (`pace.pace_headers`): litellm keeps the
    provider's in ``_hidden_params["additional_headers"]`` (``llm_provider-`` prefixed)."""
    hidden = getattr(response, "_hidden_params", None)
    headers = hidden.get("additional_headers") if isinstance(hidden, dict) else None
    return pace_headers(headers or getattr(response, "_response_headers", None))


def tool_requests(calls: Any) -> tuple[ToolRequest, ...]:
    """Read the OpenAI-format ``message.tool_calls`` of a litellm answer (objects or dicts:
    ``{"id", "type": "function", "function": {"name", "arguments"}}``); () when there are none.
    """
    requests = []
    for call in calls or ():
        function = _field(call, "function")
        arguments = _field(function, "arguments")
        requests.append(ToolRequest(str(_field(call, "id") or ""), str(_field(function, "name")),
                                    arguments if isinstance(arguments, str) else ""))
    return tuple(requests)


async def embed(endpoint: Endpoint, texts: list[str], timeout_s: float) -> EmbeddingReply:
    """Send one embeddings request for ``texts`` from this process (one HTTP request, no
    retries). A ``local/<name>`` model is run here instead, without litellm or a request
    (worker/evals/llm/local_embed.py; ``timeout_s`` does not apply).

    Raises:
        ProviderError: the call failed or the answer lacks a vector per text (with the
            field to blame, as `chat`).
    """
    if local_embed.is_local(endpoint.model):
        vectors, usage, latency_ms = await local_embed.embed(endpoint.model, texts)
        return EmbeddingReply(vectors, usage, latency_ms)
    name = direct.wire_model(endpoint)
    if name is not None:
        return await direct_embed(endpoint, name, texts, timeout_s)

    async def here(kwargs: dict[str, Any]) -> EmbeddingReply:
        await load_litellm()
        return await send_embed(kwargs, texts)

    return await _send(endpoint, timeout_s, "embed", here)


async def send_embed(kwargs: dict[str, Any], texts: list[str]) -> EmbeddingReply:
    """Send one embeddings request with litellm from this process (`embed` without the
    ``api_base`` check and the key lookup, as `send_chat`).

    Raises:
        ProviderError: the call failed or the answer lacks a vector per text, or
            `check_provider` refused it.
    """
    check_provider(_endpoint_of(kwargs))
    litellm = litellm_module()
    started = time.perf_counter()
    try:
        response = await litellm.aembedding(input=texts, **kwargs)
        vectors = [list(map(float, _field(item, "embedding"))) for item in response.data]
    except ProviderError:
        raise
    except Exception as exc:
        raise to_provider_error(exc, kwargs.get("api_key")) from None
    if len(vectors) != len(texts):
        raise ProviderError("provider", f"expected {len(texts)} embeddings, got {len(vectors)}",
                            retryable=True)
    return EmbeddingReply(vectors, usage_of(response), (time.perf_counter() - started) * 1000,
                          headers_of(response))


def _field(item: Any, name: str) -> Any:
    return item[name] if isinstance(item, dict) else getattr(item, name)


def usage_of(response: Any) -> TokenUsage | None:
    """Read a litellm response's tokens (or the ``usage`` JSON object of a direct answer, a
    dict): prompt, completion, cached and cache-written prompt.

    Cache writes are litellm's ``prompt_tokens_details.cache_write_tokens`` (its canonical
    name, mirrored as ``cache_creation_tokens``), or Anthropic's ``cache_creation_input_tokens``
    on the usage itself (as Anthropic-compatible gateways send it).

    Returns:
        The tokens, or None when the answer reports no usage: litellm then gives zero prompt
        tokens, which no answered prompt has, so the cost is unknown (never assumed $0).
    """
    usage = response if isinstance(response, dict) else _attr(response, "usage")
    prompt = _count(_attr(usage, "prompt_tokens")) if usage is not None else 0
    if usage is None or prompt == 0:
        return None
    details = _attr(usage, "prompt_tokens_details")
    cached = _attr(details, "cached_tokens") if details is not None else None
    written = max(_count(_attr(details, name)) for name in
                  ("cache_write_tokens", "cache_creation_tokens")) if details is not None else 0
    written = written or _count(_attr(usage, "cache_creation_input_tokens"))
    return TokenUsage(prompt, _count(_attr(usage, "completion_tokens")), _count(cached),
                      written)


def _attr(item: Any, name: str) -> Any:
    """``item[name]`` of a JSON object (the direct path), else the attribute (litellm's
    objects); None when absent."""
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def to_provider_error(exc: Exception, secret: str | None = None) -> ProviderError:
    """Map a litellm or OpenAI SDK exception to a `ProviderError` (pure).

    429 is ``rate_limited``, except a request larger than the provider's quota lets through
    at once ("Request too large", never retried, field ``request``); timeouts are ``timeout``;
    408, 409, 5xx, connection errors and answers that cannot be parsed are retryable
    ``provider`` errors; other statuses (400, 401,
    403, 404, 422) are not retryable. ``Retry-After`` (or ``retry-after-ms``) is read from the
    response headers. The key, if it appears in the message, is masked.
    """
    name = type(exc).__name__
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    message = str(exc) or name
    if secret:
        message = message.replace(secret, "***")
    message = message[:MAX_MESSAGE_CHARS]
    if "Timeout" in name or isinstance(exc, TimeoutError):
        return ProviderError("timeout", message, status=status, retryable=True)
    retry_after = _retry_after(exc)
    headers = pace_headers(_headers_of_error(exc))
    if (status == 429 or "RateLimit" in name) and "request too large" in message.lower():
        # larger than the quota lets through at once (OpenAI: "Request too large for ... tokens
        # per min"): no wait helps, the prompt or max_tokens must shrink
        return ProviderError("provider", message, status=status or 429, retryable=False,
                             headers=headers, field="request")
    if status == 429 or "RateLimit" in name:
        return ProviderError("rate_limited", message, status=status or 429, retryable=True,
                             retry_after_s=retry_after, headers=headers)
    retryable = status is None or status >= 500 or status in (408, 409)
    return ProviderError("provider", message, status=status, retryable=retryable,
                         retry_after_s=retry_after, headers=headers)


def _headers_of_error(exc: Exception) -> Any:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    return headers if headers is not None else getattr(exc, "litellm_response_headers", None)


def _retry_after(exc: Exception) -> float | None:
    headers = _headers_of_error(exc)
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        seconds = parse_retry_after(str(millis), time.time())
        return None if seconds is None else seconds / 1000
    value = headers.get("retry-after")
    return parse_retry_after(str(value), time.time()) if value is not None else None


def count_tokens(model: str, messages: list[dict[str, str]]) -> int:
    """Count the prompt tokens of ``messages`` with litellm's tokenizer for ``model``.

    An ``openai/<name>`` model litellm does not know (`direct.unknown_openai_model`: every
    model of the direct path) is counted with tiktoken's ``cl100k_base``, litellm's default
    encoding, without importing litellm (`direct.count_tokens`). Falls back to 4 characters a
    token (OpenAI's rule of thumb for English) when neither can count for this model.
    """
    try:
        if direct.unknown_openai_model(model):
            return direct.count_tokens(messages)
        return int(litellm_module().token_counter(model=model, messages=messages))
    except Exception:  # an unknown tokenizer: estimate instead
        return sum(len(str(m.get("content") or "")) for m in messages) // 4 + 4 * len(messages)
