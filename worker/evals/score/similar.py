"""``similar``: embedding cosine similarity of the output and ``expected`` (or ``value``).

Options: ``threshold`` (cosine, -1 to 1, default 0.8): the similarity that passes; ``value``: a
reference text instead of the example's ``expected``; and the model fields of
worker/evals/llm/endpoints.py (default: ``settings.embedding``). The two texts are embedded in one
litellm embeddings call (any litellm embedding model; a local model through an
OpenAI-compatible server with ``api_base``), or by an in-process sentence-transformers model of
the worker, ``model: local/<name>`` (worker/evals/llm/local_embed.py). A failed call is an errored
assertion (unscored). The score is the cosine clipped to 0-1.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from worker.errors import ConfigError
from worker.evals.llm import ENDPOINT_KEYS, parse_endpoint
from worker.evals.llm_types import Endpoint, ModelCalls, RunUsage
from worker.evals.types import AssertionResult, AssertionSpec, Example

SIMILAR_KEYS = ("threshold", "value", *ENDPOINT_KEYS)
DEFAULT_THRESHOLD = 0.8
Fail = Callable[[str], ConfigError]


def validate_similar(spec: AssertionSpec, fail: Fail) -> None:
    """Check a ``similar`` spec's options at config time.

    Raises:
        ConfigError: ``fail(message)`` for an unknown or malformed option.
    """
    p = spec.params
    for key in p:
        if key not in SIMILAR_KEYS:
            raise fail(f"unknown option {key!r} (known options: {', '.join(SIMILAR_KEYS)})")
    threshold = p.get("threshold", DEFAULT_THRESHOLD)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) \
            or not -1 <= threshold <= 1:
        raise fail("`threshold` must be a cosine similarity from -1 to 1")
    if "value" in p and (not isinstance(p["value"], str) or not p["value"]):
        raise fail("`value` must be a non-empty string")
    if "model" in p:
        parse_endpoint(p, fail, embedding=True)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Return the cosine similarity of two vectors (0.0 when either is all zeros)."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def embed_texts(output: Any, reference: Any) -> list[str]:
    """Return the two texts one ``similar`` check embeds: the output, then the reference."""
    return [_text(output), _text(reference)]


async def check_similar(spec: AssertionSpec, default: Endpoint | None, caller: ModelCalls,
                        example: Example, output: Any, fail: Fail,
                        use_cache: bool = True) -> tuple[AssertionResult, RunUsage]:
    """Embed the output and the reference and compare them.

    Raises:
        ConfigError: ``fail(...)`` when no embedding model is configured.
    """
    p = spec.params
    if "model" in p:
        endpoint = parse_endpoint(p, fail, embedding=True)
    elif default is not None:
        endpoint = default
    else:
        raise fail("no embedding model: set `model` here or `settings.embedding.model`")
    reference = p.get("value", example.expected)
    if reference is None:
        return AssertionResult("similar", False, 0.0, "example has no `expected` value to "
                               "compare with (or set `value`)"), RunUsage()
    outcome = await caller.embed(endpoint, embed_texts(output, reference), use_cache=use_cache)
    if outcome.answer is None or len(outcome.answer.vectors) != 2:
        return AssertionResult("similar", False, 0.0, f"embedding error: {outcome.error}",
                               errored=True), outcome.spend
    similarity = cosine(*outcome.answer.vectors)
    threshold = float(p.get("threshold", DEFAULT_THRESHOLD))
    passed = similarity >= threshold - 1e-12
    return AssertionResult(  # a NaN similarity (broken vectors) stays NaN: scoring fails it
        "similar", passed, min(1.0, max(0.0, similarity)) if math.isfinite(similarity)
        else similarity,
        "" if passed else f"similarity {similarity:.3f} < {threshold:g}",
        details={"similarity": similarity}), outcome.spend
