"""Call self-hosted OpenAI-compatible servers directly over aiohttp, without litellm.

Which configs take this path (`wire_model`): an endpoint with an ``api_base`` whose model is
``openai/<name>``, ``<name>`` a model litellm does not know (not in its bundled price table, and
none of the OpenAI families litellm rewrites requests for: ``o1``/``o3``/``o4``..., ``gpt-5``,
audio and search models), and whose ``params`` are all standard OpenAI request fields
(`OPENAI_PARAMS`). For exactly these, litellm's own path is a pass-through: it sends
``POST {api_base}/chat/completions`` (or ``/embeddings``) with ``model`` = ``<name>``, the messages
or inputs, the params unchanged and ``Authorization: Bearer <key>``, and reads the OpenAI answer
back. This module sends the same request itself and leaves the reading of the answer and the
classification of a failure to worker/evals/llm/client.py, which treats both paths alike
(`DirectError` carries what litellm's exceptions carry: the status and the answer's headers).
Every other config (a hosted provider, a model litellm knows, ``hosted_vllm/``, ``ollama_chat/``
and other prefixes whose requests litellm reshapes, a non-standard param such as ``top_k``) stays
on litellm. ``LLMGATE_DIRECT_CLIENT=0`` on the worker sends every call through litellm.

Prices and token counts without litellm's import: litellm's price table is the JSON file it
ships (`price_table`, the same dict litellm loads with ``LITELLM_LOCAL_MODEL_COST_MAP=True``),
found through the package's location (`importlib.util.find_spec` runs none of its code). Token
counts for estimates of ``openai/<name>`` models litellm does not know use tiktoken's
``cl100k_base`` (litellm's default encoding; its copy is read from litellm's folder, never
fetched) with OpenAI's message overhead (`count_tokens`).

One ``aiohttp.ClientSession`` per event loop keeps connections open between calls
(`session_for`). aiohttp, not httpx: on the bench (bench/direct_client.py: 1,000 calls, 20 ms,
concurrency 64, 2 cores) httpx 0.29 / httpcore 1.0.9 spent about 5 ms of CPU a call in its
connection pool (24 s of wall for a 0.31 s floor), aiohttp 0.23 ms (0.77 s); aiohttp is already
installed with litellm, whose own OpenAI calls use it.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import os
import re
import time
import weakref
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from worker.evals.llm_types import Endpoint

#: The worker variable that turns the direct path off (``0``, ``false``, ``no``, ``off``).
DIRECT_ENV = "LLMGATE_DIRECT_CLIENT"
#: The model prefix of the direct path.
OPENAI_PREFIX = "openai/"
#: litellm's bundled price table, a file of its package.
PRICE_FILE = "model_prices_and_context_window_backup.json"
#: Request fields of OpenAI's chat completions and embeddings APIs that litellm passes through
#: unchanged for an ``openai/`` model it does not know (checked by
#: tests/unit/evals/llm/test_direct_parity.py against the requests litellm sends).
OPENAI_PARAMS = frozenset({
    "temperature", "top_p", "n", "stop", "max_tokens", "max_completion_tokens",
    "presence_penalty", "frequency_penalty", "logit_bias", "seed", "response_format", "tools",
    "tool_choice", "parallel_tool_calls", "logprobs", "top_logprobs"})
#: OpenAI model families whose requests litellm rewrites (reasoning, audio, search models).
_REWRITTEN = re.compile(r"(^o\d)|gpt-5|audio|search|realtime|codex", re.IGNORECASE)
#: Most connections kept open to one server (above any run's ``concurrency``).
MAX_CONNECTIONS = 512

_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = \
    weakref.WeakKeyDictionary()
_keepers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncIterator[None]] = \
    weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Reply:
    """What `worker.evals.llm.client.to_provider_error` reads of a failed call's answer: its
    headers (case-insensitive lookups)."""

    headers: Mapping[str, str]


class DirectError(Exception):
    """A failed direct call, shaped as litellm's exceptions are for
    `worker.evals.llm.client.to_provider_error`: ``status_code`` (an int; 500 for a dropped
    connection or an answer that is not an OpenAI answer, as litellm reports them) and
    ``response`` (the answer's `Reply`, or None without an answer)."""

    def __init__(self, message: str, status_code: int, response: Reply | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.response = response


class DirectTimeout(DirectError):
    """The request timed out, or the server answered 408 (litellm's ``Timeout``: status 408)."""


@dataclass(frozen=True)
class Answer:
    """The decoded JSON body of a 2xx answer, its headers and the call's wall time (ms)."""

    body: dict[str, Any]
    headers: Mapping[str, str]
    latency_ms: float


def enabled(environ: Mapping[str, str]) -> bool:
    """Return False when `DIRECT_ENV` turns the direct path off, else True."""
    return environ.get(DIRECT_ENV, "").strip().lower() not in ("0", "false", "no", "off")


def wire_model(endpoint: Endpoint, environ: Mapping[str, str] | None = None) -> str | None:
    """Return the model name to send when ``endpoint`` takes the direct path, else None.

    The rule is the module docstring's; ``environ`` (default ``os.environ``) is read for
    `DIRECT_ENV` only. Reads litellm's price table on first use (`price_table`).
    """
    if endpoint.api_base is None or not set(endpoint.params) <= OPENAI_PARAMS:
        return None
    if not enabled(os.environ if environ is None else environ):
        return None
    return endpoint.model[len(OPENAI_PREFIX):] if unknown_openai_model(endpoint.model) \
        else None


@functools.lru_cache(maxsize=1024)
def unknown_openai_model(model: str) -> bool:
    """Return whether ``model`` is ``openai/<name>`` with ``<name>`` a model litellm does not
    know: not in its price table (with or without the prefix) and of no family whose requests
    litellm rewrites (module docstring). Reads the price table on first use."""
    if not model.startswith(OPENAI_PREFIX):
        return False
    name = model[len(OPENAI_PREFIX):]
    if not name or _REWRITTEN.search(name):
        return False
    table = price_table()
    return model not in table and name not in table


def litellm_folder() -> Path | None:
    """Return the folder of the installed litellm package without importing it, or None."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def price_table() -> dict[str, Any]:
    """Return litellm's bundled price table (model name -> its entry), read once.

    Raises:
        RuntimeError: litellm is not installed or ships no price file.
    """
    folder = litellm_folder()
    if folder is None or not (folder / PRICE_FILE).is_file():
        raise RuntimeError(f"litellm's price file {PRICE_FILE} was not found: is litellm "
                           "installed?")
    table: dict[str, Any] = json.loads((folder / PRICE_FILE).read_text(encoding="utf-8"))
    return served(table)


def price_table_entry(model: str) -> dict[str, Any] | None:
    """Return litellm's bundled price entry of ``model`` (with or without its provider prefix).

    Read from litellm's price file without importing litellm (`price_table`: the table
    litellm itself loads, since llmgate sets ``LITELLM_LOCAL_MODEL_COST_MAP=True``).
    """
    table = price_table()
    entry = table.get(model)
    if entry is None and "/" in model:
        entry = table.get(model.split("/", 1)[1])
    return entry if isinstance(entry, dict) else None


def served(table: dict[str, Any]) -> dict[str, Any]:
    """Return the price file's rows as litellm serves them (its ``get_model_cost_map``
    ``_finalize_model_cost_map``): without the ``fallback_generalizations`` block, a row whose
    ``alias_of`` names another row served as that row (dropped when it names none, or another
    alias), each name of a row's ``aliases`` list served as the row unless the name is taken,
    and no ``aliases`` key left. Changes and returns ``table``."""
    table.pop("fallback_generalizations", None)
    pointers = {name: row["alias_of"] for name, row in table.items()
                if isinstance(row, dict) and isinstance(row.get("alias_of"), str)}
    owners = _alias_owners(table, pointers)
    for alias, target in pointers.items():
        if target in table and target not in pointers and alias not in owners:
            owners[alias] = target
    for row in table.values():
        if isinstance(row, dict):
            row.pop("aliases", None)
    for alias in pointers.keys() - owners.keys():
        table.pop(alias)
    for alias, owner in owners.items():
        table[alias] = table[owner]
    return table


def _alias_owners(table: dict[str, Any], pointers: dict[str, str]) -> dict[str, str]:
    """The names of the rows' ``aliases`` lists and the row each is served as (first claim
    wins; a name taken by a row that is not a pointer is skipped)."""
    owners: dict[str, str] = {}
    for name, row in table.items():
        aliases = row.get("aliases") if isinstance(row, dict) else None
        if name in pointers or not isinstance(aliases, list):
            continue
        for alias in aliases:
            if (alias not in table or alias in pointers) and alias not in owners:
                owners[alias] = name
    return owners


@functools.cache
def _encoding() -> Any:
    folder = litellm_folder()
    if folder is not None:  # litellm's copy of tiktoken's files: never fetched
        os.environ.setdefault("TIKTOKEN_CACHE_DIR",
                              str(folder / "litellm_core_utils" / "tokenizers"))
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def count_tokens(messages: list[dict[str, str]]) -> int:
    """Count a chat prompt's tokens as OpenAI does for ``cl100k_base``: 3 to prime the reply,
    and per message 3 plus its role's and content's tokens (OpenAI cookbook, "How to count
    tokens with tiktoken"). An estimate for a self-hosted model, whose own tokenizer differs;
    its answers report the real counts.

    Raises:
        Exception: tiktoken is missing or cannot load ``cl100k_base`` (the caller falls back).
    """
    encoding = _encoding()
    total = 3
    for message in messages:
        total += 3 + len(encoding.encode(str(message.get("role") or ""), disallowed_special=()))
        total += len(encoding.encode(str(message.get("content") or ""), disallowed_special=()))
    return total


async def session_for(loop: asyncio.AbstractEventLoop) -> aiohttp.ClientSession:
    """Return the shared session of ``loop``, made on first use and closed when the loop shuts
    down (``asyncio.run`` closes its async generators: `_keep` closes the session then)."""
    session = _sessions.get(loop)
    if session is None or session.closed:
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=MAX_CONNECTIONS, limit_per_host=0),
            auto_decompress=True, raise_for_status=False)
        _sessions[loop] = session
        keeper = _keep(session)
        await keeper.__anext__()
        _keepers[loop] = keeper
    return session


async def _keep(session: aiohttp.ClientSession) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await session.close()


async def close() -> None:
    """Close the running loop's session, if it has one."""
    loop = asyncio.get_running_loop()
    session = _sessions.pop(loop, None)
    _keepers.pop(loop, None)
    if session is not None:
        await session.close()


async def post(api_base: str, path: str, body: dict[str, Any], key: str | None,
               timeout_s: float) -> Answer:
    """Send one request (no retries) and return its 2xx JSON answer.

    Args:
        api_base: the server's base URL (``.../v1``), without a trailing slash.
        path: ``chat/completions`` or ``embeddings``.
        body: the JSON request.
        key: sent as ``Authorization: Bearer <key>`` (None: no header).
        timeout_s: connect and read timeout each, seconds (the OpenAI SDK litellm uses applies
            one number to each phase).

    Raises:
        DirectTimeout: the request timed out, or the server answered 408.
        DirectError: any other non-2xx answer (its status and headers), a dropped or refused
            connection or an answer that is not a JSON object (status 500).
    """
    headers = {"content-type": "application/json", "accept": "application/json"}
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    timeout = aiohttp.ClientTimeout(total=None, connect=timeout_s, sock_connect=timeout_s,
                                    sock_read=timeout_s)
    started = time.perf_counter()
    try:
        session = await session_for(asyncio.get_running_loop())
        async with session.post(f"{api_base}/{path}", data=json.dumps(body).encode(),
                                headers=headers, timeout=timeout,
                                allow_redirects=False) as response:
            status, content = response.status, await response.read()
            answer_headers = response.headers
    except TimeoutError as exc:  # aiohttp's ServerTimeoutError and ConnectionTimeoutError too
        raise DirectTimeout(f"Request timed out ({type(exc).__name__}) - timeout value="
                            f"{timeout_s:g}, time taken={time.perf_counter() - started:.2f} "
                            "seconds", 408) from None
    except aiohttp.ClientError as exc:  # refused, reset, protocol errors
        raise DirectError(f"Connection error: {type(exc).__name__}: {exc}", 500) from None
    latency_ms = (time.perf_counter() - started) * 1000
    reply = Reply(answer_headers)
    if status == 408:
        raise DirectTimeout(f"Timeout Error: {error_message(status, content)}", 408, reply)
    if not 200 <= status < 300:
        raise DirectError(error_message(status, content), status, reply)
    try:
        decoded = json.loads(content)
    except ValueError as exc:
        raise DirectError(f"the answer is not JSON: {exc}", 500, reply) from None
    if not isinstance(decoded, dict):
        raise DirectError("the answer is not a JSON object", 500, reply)
    return Answer(decoded, answer_headers, latency_ms)


def error_message(status: int, content: bytes) -> str:
    """Return the message of an error answer: OpenAI's ``error.message`` (or a top-level
    ``message`` / ``detail``), else ``Error code: <status>`` and the start of the body."""
    try:
        body = json.loads(content)
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        for found in ((error.get("message") if isinstance(error, dict) else error),
                      body.get("message"), body.get("detail")):
            if isinstance(found, str) and found:
                return found
    text = content.decode("utf-8", "replace").strip()[:200]
    return f"Error code: {status}" + (f" - {text}" if text else "")
