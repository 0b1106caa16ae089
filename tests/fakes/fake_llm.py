"""A fake OpenAI-compatible model provider over real HTTP on 127.0.0.1, for tests and benchmarks.

Endpoints (also served without the ``/v1`` prefix):

- ``POST /v1/chat/completions``: answers by rule. The text of a request is its messages'
  contents joined with newlines; the first rule ``{"match": substring or [substrings],
  "model"?: name, "reply": text or null, "finish_reason"?: str, "usage"?: {...} or null}``
  whose ``match`` occurs in that text (every one of a list) and whose ``model``, when given,
  equals the request's gives the reply; else ``default_reply`` when set; else ``"echo: "`` +
  the last user message. A ``reply`` of null answers ``"content": null``; ``finish_reason``
  defaults to ``stop``. ``usage`` counts whitespace-separated words (``prompt_tokens``: all
  message contents, ``completion_tokens``: the reply), or, with ``"token_counts": true`` in the
  setup, tokens as OpenAI counts them (tiktoken's ``cl100k_base``, 3 tokens per message plus its
  role, 3 to prime the reply: OpenAI cookbook, "How to count tokens with tiktoken"); a rule's
  ``usage`` (``prompt_tokens``, ``completion_tokens``, ``cached_tokens``, ``cache_write_tokens``
  in ``prompt_tokens_details``, and Anthropic's ``cache_creation_input_tokens`` at the top, as
  Anthropic-compatible gateways send it) overrides them; ``"usage": null`` sends no usage.
  A rule with ``"tool_calls": [{"name", "arguments": {...}}]`` answers with those calls in
  OpenAI's format (``message.tool_calls``, ids ``call_<seq>_<i>``, arguments as JSON text,
  ``finish_reason`` ``tool_calls``, content ``reply`` or null); the text of a request includes
  its ``tool`` messages, so a later rule can match a tool's result and give the final answer.
- ``POST /v1/embeddings``: a deterministic 64-dimension unit vector per input text (words hashed
  with SHA-256 into buckets), so texts sharing words have a high cosine similarity; ``usage``
  counts the texts' words (their tokens with ``token_counts``).
- Control, never recorded: ``GET /_fake/state`` (``calls``, ``faults`` left, ``config``,
  ``rate_limit``: ``{"admitted": n, "refused": n}``), ``POST /_fake/setup`` (merges ``rules``,
  ``default_reply``, ``latency_ms``, ``token_counts``, ``batch``, ``faults``, ``rate_limit``;
  lists are replaced; a bad ``rate_limit`` is answered 400), ``POST /_fake/reset`` (forget calls and
  faults, refill the rate-limit buckets and zero their counts; the config stays).

A rule with ``"rag_judge": true`` ignores ``reply`` and judges llmgate's built-in RAG criteria
by word overlap instead (tests/fakes/fake_rag_judge.py); one with ``"judge": "honest" | "obey" |
"quote"`` judges an ``llm_judge`` prompt by its reference (tests/fakes/fake_judge.py). Their
verdict lines carry the prompt's seal, as a judge following the format writes them; a fixed
``reply`` gets it with ``"seal": true``.

Faults are consumed in order: the first fault ``{"match"?, "model"?, "path"?: "chat" |
"embeddings", "times"?: n (default 1; null = forever), "status"?: code, "headers"?: {...},
"body"?: JSON, "stall"?: true, "malformed"?: true}`` that applies answers instead of the rule:
``stall`` accepts the request and never answers (until the server stops); ``malformed`` answers
200 with a body that is not JSON; otherwise ``status`` with ``headers`` and ``body``. Every
answer but a rate limit's 429 waits ``latency_ms`` first with ``asyncio.sleep``, so concurrent
slow requests overlap.

``"batch": N`` (null or 0: off) holds each chat answer until its batch is full: chat requests are
counted in arrival order and each N in a row form a batch, answered once its N-th request has
arrived (after ``latency_ms``), or after ``BATCH_WAIT_S`` if it never fills. A test that needs a
client to have sent N calls before it sees any answer (a budget charged per answer) uses it
instead of a latency that a loaded machine can outlast.

A provider's quota: ``"rate_limit": {"requests_per_s": R, "request_burst"?: B (default R, at
least 1), "tokens_per_min"?: T or null (default null: no token limit), "token_burst"?: C
(default T / 60), "announce"?: "retry_after_ms" (default) | "retry_after" | "headers"}`` (null:
no limit; setting it refills the buckets) gives each ``authorization`` header value its own
continuous token buckets, full at first and refilled on the monotonic clock: requests
(capacity B, R per second) and, with T, tokens (capacity C, T / 60 per second). A chat or
embeddings request costs 1 request and, with T, its ``usage.prompt_tokens`` (as counted above,
a rule's override included; an embeddings input's count) plus its ``max_tokens`` (else
``max_completion_tokens``, else 0) tokens. It is admitted only when both buckets hold its cost;
else nothing is taken and it is answered 429 at once (no ``latency_ms``, no fault consumed)
with OpenAI's body ``{"error": {"message": "Rate limit reached for requests per second (RPS):
Limit R, Used U, Requested 1. Please try again in 50ms.", "type": "requests", "param": null,
"code": "rate_limit_exceeded"}}`` (``"tokens"`` and ``tokens per min (TPM): Limit T`` for the
token bucket; when both lack, the one with the longer wait; the wait is exact, rounded up to a
millisecond). ``announce``: ``retry_after_ms`` sends ``retry-after-ms`` (milliseconds, rounded
up) and ``retry-after`` (whole seconds, rounded up, at least 1) with a 429; ``retry_after`` only
``retry-after``; ``headers`` neither, but every answer, admitted or refused, carries OpenAI's
``x-ratelimit-limit-requests`` (B, whole), ``x-ratelimit-remaining-requests`` (the level after
the request, rounded down) and ``x-ratelimit-reset-requests`` (the time until the bucket is
full, as Go prints a duration: ``250ms``, ``1.5s``, ``6m0s``), and with T the same three for
``-tokens``; under the other two, answers carry no ``x-ratelimit-*``. A request costing more
than C tokens can never pass: its 429 says ``Request too large`` and names no retry time. A
refused call is recorded with status 429 and ``fault`` ``"rate_limited"``.

Each recorded call holds ``seq``, ``path``, ``model``, ``status``, ``fault``, ``t``, ``messages``,
``input``, ``authorization`` (the header as received) and the other body fields as ``params``.

In-process: ``with running_fake_llm() as llm: llm.url ... llm.calls()``; as a process:
``python -m tests.fakes.fake_llm --port 0 --ready-file R --latency-ms 100`` (``--rate-limit-rps R``
and ``--rate-limit-announce A`` set ``rate_limit``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import importlib.util
import json
import math
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse as StarletteJSONResponse
from starlette.responses import Response
from starlette.routing import Route

from tests.fakes.fake_judge import judge_reply, seal_reply
from tests.fakes.fake_rag_judge import rag_reply
from tests.fakes.fake_rate_limit import (
    ANNOUNCES,
    Admission,
    Bucket,
    rate_limit_config,
    refusal,
)


class JSONResponse(StarletteJSONResponse):
    """JSON as OpenAI's API writes it: every non-ASCII character as a ``\\u`` escape, so a
    reply may carry a lone surrogate (``"\\ud800"``), as real providers' replies have."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False,
                          separators=(",", ":")).encode("ascii")


#: Dimensions of the fake embedding vectors.
EMBEDDING_DIMS = 64
#: How long a stalled request is held open at most, seconds (the server's stop ends it sooner).
STALL_S = 3600.0
#: The longest a ``batch`` holds its answers for requests that never come, seconds.
BATCH_WAIT_S = 10.0
#: Usage keys a rule may override.
USAGE_KEYS = ("prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens",
              "cache_creation_input_tokens")



def embed_text(text: str) -> list[float]:
    """Return the fake unit embedding of ``text`` (`EMBEDDING_DIMS` floats, deterministic)."""
    vector = [0.0] * EMBEDDING_DIMS
    for word in text.lower().split():
        digest = hashlib.sha256(word.strip(".,!?;:\"'").encode()).digest()
        vector[digest[0] % EMBEDDING_DIMS] += 1.0 if digest[1] % 2 else -1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


@functools.cache
def _encoding() -> Any:
    """tiktoken's ``cl100k_base``, read offline from the copy litellm ships (never fetched)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("token_counts needs litellm's bundled tokenizers")
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(folder))
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def count_tokens(text: str) -> int:
    """Return the ``cl100k_base`` tokens of ``text``."""
    return len(_encoding().encode(text, disallowed_special=()))


def prompt_tokens(messages: Any) -> int:
    """Return a chat prompt's tokens as OpenAI counts them (3 per message, its role and
    content, 3 to prime the reply; OpenAI cookbook, "How to count tokens with tiktoken")."""
    if not isinstance(messages, list):
        return 0
    total = 3
    for message in messages:
        if isinstance(message, dict):
            total += 3 + count_tokens(str(message.get("role", ""))) + count_tokens(
                _text_of([message]))
    return total


def _text_of(messages: Any) -> str:
    if not isinstance(messages, list):
        return ""
    parts = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "\n".join(parts)


def _last_user(messages: Any) -> str:
    if not isinstance(messages, list):
        return ""
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    return _text_of(users[-1:]) if users else _text_of(messages[-1:])


def _max_tokens(body: dict[str, Any]) -> int:
    """Return a request's ``max_tokens``, else its ``max_completion_tokens``, else 0."""
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return max(0, int(value))
    return 0


class FakeLLM:
    """The state and Starlette app of the fake provider (thread-safe control methods)."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self._config: dict[str, Any] = {"rules": [], "default_reply": None, "latency_ms": 0.0,
                                        "token_counts": False, "rate_limit": None, "batch": None}
        self._faults: list[dict[str, Any]] = []
        self._calls: list[dict[str, Any]] = []
        self._seq = 0
        self._buckets: dict[str, dict[str, Bucket]] = {}  # authorization -> kind -> bucket
        self._limited = {"admitted": 0, "refused": 0}
        self.setup(config or {})
        routes = [Route(p, self._chat, methods=["POST"])
                  for p in ("/v1/chat/completions", "/chat/completions")]
        routes += [Route(p, self._embeddings, methods=["POST"])
                   for p in ("/v1/embeddings", "/embeddings")]
        routes += [Route("/_fake/state", self._http_state, methods=["GET"]),
                   Route("/_fake/setup", self._http_setup, methods=["POST"]),
                   Route("/_fake/reset", self._http_reset, methods=["POST"])]
        self.app = Starlette(routes=routes)

    # ------------------------------------------------------------------ control
    def setup(self, cfg: dict[str, Any]) -> None:
        """Merge ``cfg`` (``rules``, ``default_reply``, ``latency_ms``, ``token_counts``,
        ``batch``, ``faults``, ``rate_limit``; a given ``rate_limit`` refills the buckets).

        Raises:
            ValueError: for a bad ``rate_limit`` (nothing is merged then).
        """
        limit = rate_limit_config(cfg["rate_limit"]) if "rate_limit" in cfg else None
        with self._lock:
            for key in ("rules", "default_reply", "latency_ms", "token_counts", "batch"):
                if key in cfg:
                    self._config[key] = cfg[key]
            if "faults" in cfg:
                self._faults = [dict(f) for f in cfg["faults"]]
            if "rate_limit" in cfg:
                self._config["rate_limit"] = limit
                self._buckets.clear()

    def reset(self) -> None:
        """Forget recorded calls and pending faults; refill the rate-limit buckets and zero
        their counts (the config stays)."""
        with self._lock:
            self._calls.clear()
            self._faults.clear()
            self._buckets.clear()
            self._limited = {"admitted": 0, "refused": 0}

    def calls(self, path: str | None = None) -> list[dict[str, Any]]:
        """Return a copy of the recorded calls, optionally only ``chat`` or ``embeddings``."""
        with self._lock:
            return [dict(c) for c in self._calls if path is None or c["path"] == path]

    def state(self) -> dict[str, Any]:
        """Return ``{"calls", "faults", "config", "rate_limit": {"admitted", "refused"}}`` as
        JSON-able data (requests are counted while a ``rate_limit`` is set)."""
        with self._lock:
            return {"calls": [dict(c) for c in self._calls],
                    "faults": [dict(f) for f in self._faults], "config": dict(self._config),
                    "rate_limit": dict(self._limited)}

    # ------------------------------------------------------------------ serving
    def _take_fault(self, path: str, model: str, text: str) -> dict[str, Any] | None:
        with self._lock:
            for fault in self._faults:
                if fault.get("path", path) != path or fault.get("model", model) != model:
                    continue
                if fault.get("match") is not None and fault["match"] not in text:
                    continue
                times = fault.get("times", 1)
                if times is not None:
                    if times <= 0:
                        continue
                    fault["times"] = times - 1
                return dict(fault)
        return None

    def _record(self, path: str, model: str, body: dict[str, Any], status: int,
                fault: dict[str, Any] | None, authorization: str | None = None,
                kind: str | None = None) -> int:
        with self._lock:
            self._seq += 1
            if fault is not None:
                kind = "stall" if fault.get("stall") else (
                    "malformed" if fault.get("malformed") else f"status {fault.get('status')}")
            self._calls.append({"seq": self._seq, "path": path, "model": model, "status": status,
                                "fault": kind, "t": time.monotonic(),
                                "messages": body.get("messages"), "input": body.get("input"),
                                "authorization": authorization,
                                "params": {k: v for k, v in body.items()
                                           if k not in ("messages", "input", "model")}})
            return self._seq

    def _bucket_set(self, authorization: str | None, limit: dict[str, Any]) -> dict[str, Bucket]:
        """The buckets of ``authorization``, refilled to now (call under the lock)."""
        buckets = self._buckets.get(authorization or "")
        if buckets is None:
            buckets = {"requests": Bucket(limit["request_burst"], limit["requests_per_s"])}
            if limit["tokens_per_min"] is not None:
                buckets["tokens"] = Bucket(limit["token_burst"], limit["tokens_per_min"] / 60)
            self._buckets[authorization or ""] = buckets
        now = time.monotonic()
        for bucket in buckets.values():
            bucket.refill(now)
        return buckets

    def _admit(self, path: str, model: str, body: dict[str, Any], authorization: str | None,
               tokens: Callable[[], int]) -> Admission:
        """Take a request's cost from its buckets, or record and build its 429."""
        with self._lock:
            limit = self._config["rate_limit"]
        if limit is None:
            return Admission()
        costs = {"requests": 1.0,
                 "tokens": float(tokens()) if limit["tokens_per_min"] is not None else 0.0}
        with self._lock:
            buckets = self._bucket_set(authorization, limit)
            waits = {kind: bucket.wait_s(costs[kind]) for kind, bucket in buckets.items()}
            kind = max(waits, key=lambda k: waits[k])  # ties: requests
            if waits[kind] <= 0:
                for name, bucket in buckets.items():
                    bucket.level -= costs[name]
            self._limited["admitted" if waits[kind] <= 0 else "refused"] += 1
            headers: dict[str, str] = {}
            if limit["announce"] == "headers":
                for name, bucket in buckets.items():
                    headers.update(bucket.headers(name))
            if waits[kind] <= 0:
                return Admission(None, headers)
            answer = refusal(limit, kind, buckets[kind], costs[kind], waits[kind], headers)
        self._record(path, model, body, 429, None, authorization, "rate_limited")
        return Admission(answer, headers)

    async def _answer_fault(self, fault: dict[str, Any]) -> Response:
        if fault.get("stall"):
            deadline = time.monotonic() + float(fault.get("stall_s", STALL_S))
            while not self.stopping.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            return Response(status_code=504)
        if fault.get("malformed"):
            return Response(b'{"id": "chatcmpl-broken", "choices": [{"mess', status_code=200,
                            media_type="application/json")
        status = int(fault.get("status", 500))
        body = fault.get("body", {"error": {"message": f"fake error {status}",
                                            "type": "server_error", "code": None}})
        return JSONResponse(body, status_code=status, headers=fault.get("headers") or {})

    async def _read(self, request: Request) -> dict[str, Any] | None:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    async def _chat(self, request: Request) -> Response:
        body = await self._read(request)
        if body is None:
            return JSONResponse({"error": {"message": "body must be a JSON object"}}, 400)
        model, messages = str(body.get("model", "")), body.get("messages")
        text, authorization = _text_of(messages), request.headers.get("authorization")
        gate = self._admit("chat", model, body, authorization, lambda: self._prompt_count(
            self._rule(model, text), text, messages) + _max_tokens(body))
        if gate.refusal is not None:
            return gate.refusal
        fault = self._take_fault("chat", model, text)
        seq = self._record("chat", model, body, int(fault.get("status", 200)) if fault else 200,
                           fault, authorization)
        arrived = len(self.calls("chat"))
        await asyncio.sleep(float(self._config["latency_ms"]) / 1000)
        await self._wait_for_batch(arrived)
        if fault is not None:
            return gate.stamp(await self._answer_fault(fault))
        return gate.stamp(self._completion(seq, model, messages, text))

    async def _wait_for_batch(self, arrived: int) -> None:
        """Wait until the batch of the ``arrived``-th chat request is full (module docstring)."""
        size = int(self._config.get("batch") or 0)
        if size <= 0:
            return
        full = -(-arrived // size) * size
        deadline = time.monotonic() + BATCH_WAIT_S
        while len(self.calls("chat")) < full and time.monotonic() < deadline:
            await asyncio.sleep(0.005)

    def _completion(self, seq: int, model: str, messages: Any, text: str) -> Response:
        rule = self._rule(model, text)
        calls = (rule or {}).get("tool_calls")
        reply = self._reply_text(rule, messages) if not calls or "reply" in (rule or {}) else None
        message: dict[str, Any] = {"role": "assistant", "content": reply}
        if calls:
            message["tool_calls"] = [
                {"id": f"call_{seq}_{i}", "type": "function",
                 "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))}}
                for i, c in enumerate(calls)]
        finish = "tool_calls" if calls else "stop"
        body = {
            "id": f"chatcmpl-fake-{seq}", "object": "chat.completion", "created": 1700000000,
            "model": model, "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": (rule or {}).get("finish_reason", finish),
                         "logprobs": None}]}
        if rule is None or "usage" not in rule or rule["usage"] is not None:
            body["usage"] = self._usage(rule, text, messages, reply or "")
        return JSONResponse(body)

    def _rule(self, model: str, text: str) -> dict[str, Any] | None:
        with self._lock:
            rules = list(self._config["rules"])
        for rule in rules:
            match = rule.get("match", "")
            needles = [str(m) for m in match] if isinstance(match, list) else [str(match)]
            if rule.get("model", model) == model and all(n in text for n in needles):
                return dict(rule)
        return None

    def _reply_text(self, rule: dict[str, Any] | None, messages: Any) -> str | None:
        if rule is not None and rule.get("rag_judge"):
            return seal_reply(rag_reply(_text_of(messages)), _text_of(messages))
        if rule is not None and rule.get("judge"):
            return judge_reply(str(rule["judge"]), _text_of(messages))
        if rule is not None:
            reply = rule.get("reply")
            if reply is not None and rule.get("seal"):
                return seal_reply(str(reply), _text_of(messages))
            return None if reply is None else str(reply)
        with self._lock:
            default = self._config["default_reply"]
        return str(default) if default is not None else "echo: " + _last_user(messages)

    def _prompt_count(self, rule: dict[str, Any] | None, text: str, messages: Any) -> int:
        """The ``usage.prompt_tokens`` of a chat request (a rule's override, else counted)."""
        over = (rule or {}).get("usage") or {}
        if "prompt_tokens" in over:
            return int(over["prompt_tokens"])
        with self._lock:
            exact = bool(self._config["token_counts"])
        return prompt_tokens(messages) if exact else len(text.split())

    def _input_count(self, texts: list[str]) -> int:
        """The ``usage.prompt_tokens`` of an embeddings request."""
        with self._lock:
            exact = bool(self._config["token_counts"])
        return sum(count_tokens(t) if exact else len(t.split()) for t in texts)

    def _usage(self, rule: dict[str, Any] | None, text: str, messages: Any,
               reply: str) -> dict[str, Any]:
        over = (rule or {}).get("usage") or {}
        with self._lock:
            exact = bool(self._config["token_counts"])
        prompt = self._prompt_count(rule, text, messages)
        completion = int(over.get("completion_tokens", count_tokens(reply) if exact
                                  else len(reply.split())))
        details = {"cached_tokens": int(over.get("cached_tokens", 0))}
        if "cache_write_tokens" in over:
            details["cache_write_tokens"] = int(over["cache_write_tokens"])
        usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                                 "total_tokens": prompt + completion,
                                 "prompt_tokens_details": details}
        if "cache_creation_input_tokens" in over:
            usage["cache_creation_input_tokens"] = int(over["cache_creation_input_tokens"])
        return usage

    async def _embeddings(self, request: Request) -> Response:
        body = await self._read(request)
        if body is None:
            return JSONResponse({"error": {"message": "body must be a JSON object"}}, 400)
        model, inputs = str(body.get("model", "")), body.get("input")
        texts = [inputs] if isinstance(inputs, str) else [str(t) for t in inputs or []]
        authorization = request.headers.get("authorization")
        gate = self._admit("embeddings", model, body, authorization,
                           lambda: self._input_count(texts) + _max_tokens(body))
        if gate.refusal is not None:
            return gate.refusal
        fault = self._take_fault("embeddings", model, "\n".join(texts))
        self._record("embeddings", model, body, int(fault.get("status", 200)) if fault else 200,
                     fault, authorization)
        await asyncio.sleep(float(self._config["latency_ms"]) / 1000)
        if fault is not None:
            return gate.stamp(await self._answer_fault(fault))
        tokens = self._input_count(texts)
        return gate.stamp(JSONResponse({
            "object": "list", "model": model,
            "data": [{"object": "embedding", "index": i, "embedding": embed_text(t)}
                     for i, t in enumerate(texts)],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}))

    async def _http_state(self, request: Request) -> Response:
        return JSONResponse(self.state())

    async def _http_setup(self, request: Request) -> Response:
        body = await self._read(request)
        if body is None:
            return JSONResponse({"error": "body must be a JSON object"}, 400)
        try:
            self.setup(body)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, 400)
        return JSONResponse({"ok": True})

    async def _http_reset(self, request: Request) -> Response:
        self.reset()
        return JSONResponse({"ok": True})


def _listen(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(1024)
    return sock


def _server(app: Starlette) -> uvicorn.Server:
    return uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                         lifespan="off", loop="asyncio",
                                         timeout_graceful_shutdown=1, backlog=1024))


class FakeLLMServer:
    """Serve a `FakeLLM` with uvicorn on 127.0.0.1 from a background thread."""

    def __init__(self, fake: FakeLLM | None = None, port: int = 0) -> None:
        self.fake = fake or FakeLLM()
        self._sock = _listen(port)
        self.port = int(self._sock.getsockname()[1])
        self._server = _server(self.fake.app)
        self._thread = threading.Thread(target=self._server.run,
                                        kwargs={"sockets": [self._sock]}, daemon=True)

    @property
    def url(self) -> str:
        """The OpenAI-style API base, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout_s: float = 10.0) -> None:
        """Start serving; raise RuntimeError when uvicorn is not up within ``timeout_s``."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake LLM server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop serving (stalled requests are released) and wait for the thread."""
        self.fake.stopping.set()
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def setup(self, cfg: dict[str, Any]) -> None:
        """See `FakeLLM.setup`."""
        self.fake.setup(cfg)

    def calls(self, path: str | None = None) -> list[dict[str, Any]]:
        """See `FakeLLM.calls`."""
        return self.fake.calls(path)

    def reset(self) -> None:
        """See `FakeLLM.reset`."""
        self.fake.reset()


@contextmanager
def running_fake_llm(config: dict[str, Any] | None = None) -> Iterator[FakeLLMServer]:
    """Serve a fresh fake provider on a free loopback port for the duration of the block."""
    server = FakeLLMServer(FakeLLM(config))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> None:
    """Command line: serve the fake until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--setup-file", type=Path, help="JSON applied as /_fake/setup")
    parser.add_argument("--ready-file", type=Path, help='gets {"url", "port", "pid"} once up')
    parser.add_argument("--rate-limit-rps", type=float, metavar="R",
                        help="rate_limit.requests_per_s (merged into the setup file's rate_limit)")
    parser.add_argument("--rate-limit-announce", choices=ANNOUNCES,
                        help="rate_limit.announce (needs a rate limit)")
    args = parser.parse_args(argv)
    cfg = json.loads(args.setup_file.read_text()) if args.setup_file else {}
    limit = dict(cfg.get("rate_limit") or {})
    if args.rate_limit_rps is not None:
        limit["requests_per_s"] = args.rate_limit_rps
    if args.rate_limit_announce is not None:
        limit["announce"] = args.rate_limit_announce
    if limit:
        cfg["rate_limit"] = limit
    try:
        fake = FakeLLM({"latency_ms": args.latency_ms, **cfg})
    except ValueError as exc:
        parser.error(str(exc))
    sock = _listen(args.port)
    port = int(sock.getsockname()[1])
    info = json.dumps({"url": f"http://127.0.0.1:{port}/v1", "port": port, "pid": os.getpid()})
    if args.ready_file:
        fd, tmp = tempfile.mkstemp(dir=args.ready_file.parent)
        with os.fdopen(fd, "w") as handle:
            handle.write(info)
        os.replace(tmp, args.ready_file)
    print(info, flush=True)
    _server(fake.app).run(sockets=[sock])


if __name__ == "__main__":
    main()
