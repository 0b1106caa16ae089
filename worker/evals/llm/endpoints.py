"""Parse the model fields shared by targets, judges and embeddings into an `Endpoint` (pure).

Fields: ``model`` (a litellm model string, required), ``params`` (a mapping of call parameters
such as ``temperature``; keys that would redirect the call or carry a key are refused),
``api_base`` or its alias ``base_url`` (an http(s) URL), ``api_key_env`` (the NAME of a worker
environment variable, never a key), ``pricing`` (``{input, output, cached_input?,
cache_write?}`` USD per million tokens, overriding litellm's price table; ``cache_write`` prices
prompt tokens written to the provider's prompt cache, Anthropic's ``cache_creation_input_tokens``).

An embedding endpoint (``similar``, ``settings.embedding``) may instead name an in-process model
of the worker, ``model: local/<name>`` (worker/evals/llm/local_embed.py), with no other field: the
name must be listed in the worker's ``LLMGATE_LOCAL_EMBEDDINGS`` (read from the environment
here) and sentence-transformers installed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from worker.evals.llm import local_embed
from worker.evals.llm_types import Endpoint, Pricing
from worker.security import FORBIDDEN_ENV_PREFIXES, is_env_name

#: Keys of an endpoint mapping.
ENDPOINT_KEYS = ("model", "params", "api_base", "base_url", "api_key_env", "pricing")
#: Call parameters a config may not set: they would move the call or the key elsewhere, or
#: turn llmgate's own retries, timeouts and streaming off.
FORBIDDEN_PARAMS = frozenset({
    "api_key", "api_base", "base_url", "model", "messages", "input", "stream", "timeout",
    "num_retries", "max_retries", "extra_headers", "headers", "custom_llm_provider",
    "aws_access_key_id", "aws_secret_access_key", "vertex_credentials", "azure_ad_token",
    "client", "mock_response", "metadata", "callbacks", "litellm_logging_obj"})
PRICING_KEYS = ("input", "output", "cached_input", "cache_write")

Fail = Callable[[str], Exception]


def parse_endpoint(values: Mapping[str, Any], fail: Fail, *, embedding: bool = False) -> Endpoint:
    """Build an `Endpoint` from a mapping holding (at least) the endpoint keys.

    Args:
        values: the mapping (other keys are ignored: the caller checks unknown keys).
        fail: makes the exception to raise from a message (a `ConfigError` at the right line).
        embedding: True for an embedding endpoint, which may name a ``local/<name>`` model.

    Raises:
        Exception: ``fail(message)`` for a missing or malformed field, or a ``local/`` model
            that is not an embedding endpoint or is not available on this worker.
    """
    model = values.get("model")
    if not isinstance(model, str) or not model.strip():
        raise fail("`model` must be a litellm model string such as openai/gpt-4o-mini")
    if local_embed.is_local(model.strip()):
        return _local(model.strip(), values, fail, embedding)
    if model.strip().lower().startswith(local_embed.LOCAL_PREFIX):  # Local/x, LOCAL/x
        name = model.strip()[len(local_embed.LOCAL_PREFIX):]
        raise fail(f"write `{local_embed.LOCAL_PREFIX}{name}` (lower case) to name a local "
                   "model; litellm has no such provider")
    if "api_base" in values and "base_url" in values:
        raise fail("give `api_base` or `base_url`, not both")
    api_base = values.get("api_base", values.get("base_url"))
    return Endpoint(model=model.strip(), params=_params(values.get("params", {}), fail),
                    api_base=None if api_base is None else _url(api_base, fail),
                    api_key_env=_key_env(values.get("api_key_env"), fail),
                    pricing=_pricing(values.get("pricing"), fail))


def _local(model: str, values: Mapping[str, Any], fail: Fail, embedding: bool) -> Endpoint:
    if not embedding:
        raise fail(f"{model} is a local embedding model: only `similar` and "
                   "`settings.embedding` can use it")
    others = [key for key in ENDPOINT_KEYS if key != "model" and key in values]
    if others:
        raise fail(f"a local model takes no {', '.join(others)} (it runs inside the worker, "
                   "free of charge)")
    problem = local_embed.config_problem(model)
    if problem is not None:
        raise fail(problem)
    return Endpoint(model=model)


def _params(value: Any, fail: Fail) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise fail("`params` must be a mapping of call parameters (temperature: 0 ...)")
    for key in value:
        if not isinstance(key, str):
            raise fail("`params` keys must be strings")
        if key in FORBIDDEN_PARAMS:
            raise fail(f"`params` may not set {key!r} (llmgate sets it, or it would send the "
                       "call or the key elsewhere)")
    return dict(value)


def _url(value: Any, fail: Fail) -> str:
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname \
            or parts.username or parts.password:
        raise fail(f"`api_base` must be an http(s) URL without credentials, got {value!r}")
    return str(value).rstrip("/")


def _key_env(value: Any, fail: Fail) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not is_env_name(value):
        raise fail("`api_key_env` must be the NAME of an environment variable of the worker "
                   f"(e.g. OPENAI_API_KEY), got {value!r}; never put a key in the config")
    if value.upper().startswith(FORBIDDEN_ENV_PREFIXES):
        raise fail(f"{value} cannot be used as an API key: variables starting with "
                   f"{', '.join(FORBIDDEN_ENV_PREFIXES)} are llmgate's own")
    return value


def _pricing(value: Any, fail: Fail) -> Pricing | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not {"input", "output"} <= set(value) \
            or not set(value) <= set(PRICING_KEYS):
        raise fail("`pricing` must be {input, output, cached_input?, cache_write?}: USD per "
                   "million tokens")
    for key, price in value.items():
        if isinstance(price, bool) or not isinstance(price, int | float) \
                or not math.isfinite(price) or price < 0:
            raise fail(f"`pricing.{key}` must be a non-negative number (USD per million tokens)")
    cached, write = value.get("cached_input"), value.get("cache_write")
    return Pricing(float(value["input"]), float(value["output"]),
                   None if cached is None else float(cached),
                   None if write is None else float(write))
