"""Config sections of LLM suites: model targets, batch commands, run settings (pure).

Called by the reader of worker/evals/config/load.py, so errors name the file and line::

    settings:
      repeats: 1                  # runs of each example (independent draws, no cache)
      cache: true                 # cache model and judge answers in Redis
      max_cost_usd: 5.00          # stop sending calls once one run has spent this
      max_duration: 1800          # seconds; no call starts after this
      retry: {max_retries: 2, backoff_base: 0.5, max_backoff: 60}
      max_provider_error_rate: 0.1   # above it (outside the PR's cause) the run is undecided
      max_judge_error_rate: 0.1      # above it the check is not success
      judge: {model: openai/gpt-4o-mini, params: {temperature: 0}}
      embedding: {model: openai/text-embedding-3-small}   # or {model: local/<name>}
      estimate_output_tokens: 256
    suites:
      - target: {model: openai/gpt-4o-mini, prompt: prompts/support.txt,
                 params: {temperature: 0}, api_base: http://127.0.0.1:8080/v1,
                 api_key_env: OPENAI_API_KEY, pricing: {input: 0.15, output: 0.6},
                 version: "2"}
        traps: evals/traps.jsonl
"""

from __future__ import annotations

import math
import posixpath
import re
from dataclasses import replace
from typing import Any

from yaml.nodes import Node

from worker.errors import ConfigError
from worker.evals.config.reader import Entries, Reader
from worker.evals.config.spelling import as_written
from worker.evals.llm import ENDPOINT_KEYS, parse_endpoint
from worker.evals.llm_types import Endpoint, ModelTarget, RetrySettings
from worker.evals.types import Config, Settings

LLM_SETTINGS_KEYS = ("repeats", "cache", "max_cost_usd", "max_duration", "retry",
                     "max_provider_error_rate", "max_judge_error_rate", "judge", "embedding",
                     "estimate_output_tokens")
MODEL_TARGET_KEYS = (*ENDPOINT_KEYS, "prompt", "version", "tools", "max_steps")
RETRY_KEYS = ("max_retries", "backoff_base", "max_backoff")
MAX_REPEATS = 100


def _number(reader: Reader, node: Node, what: str, *, low: float = 0.0,
            integer: bool = False, inclusive: bool = False) -> float:
    value = reader.value(node)
    ok = not isinstance(value, bool) and isinstance(value, int if integer else int | float) \
        and math.isfinite(value) and (value >= low if inclusive else value > low)
    if not ok:
        kind = "an integer" if integer else "a number"
        bound = f">= {low:g}" if inclusive else f"> {low:g}"
        raise reader.error(node, f"{what} must be {kind} {bound}, got {as_written(node)}")
    return float(value)


def settings_extras(reader: Reader, entries: Entries, base: Settings) -> Settings:
    """Return ``base`` with the LLM settings of ``entries`` applied (keys above)."""
    changes: dict[str, Any] = {}
    for key, (_, node) in entries.items():
        if key in LLM_SETTINGS_KEYS:
            name, value = _setting(reader, key, node)
            changes[name] = value
    return replace(base, **changes)


def _setting(reader: Reader, key: str, node: Node) -> tuple[str, Any]:
    if key == "repeats":
        repeats = int(_number(reader, node, "`repeats`", low=1, integer=True, inclusive=True))
        if repeats > MAX_REPEATS:
            raise reader.error(node, f"`repeats` may be at most {MAX_REPEATS}")
        return "repeats", repeats
    if key == "cache":
        if not isinstance(reader.value(node), bool):
            raise reader.error(node, "`cache` must be true or false")
        return "cache", reader.value(node)
    if key == "max_cost_usd":
        return key, _number(reader, node, "`max_cost_usd` (USD)")
    if key == "max_duration":
        return "max_duration_s", _number(reader, node, "`max_duration` (seconds)")
    if key == "retry":
        return "retry", _retry(reader, node)
    if key in ("max_provider_error_rate", "max_judge_error_rate"):
        return key, reader.fraction(node, f"`{key}`")
    if key in ("judge", "embedding"):
        return key, endpoint_node(reader, node, f"`settings.{key}`",
                                  embedding=key == "embedding")
    return key, int(_number(reader, node, f"`{key}`", low=1, integer=True, inclusive=True))


def _retry(reader: Reader, node: Node) -> RetrySettings:
    entries = reader.mapping(node, "`settings.retry`", RETRY_KEYS)
    default = RetrySettings()
    values = {"max_retries": default.max_retries, "backoff_base": default.backoff_base_s,
              "max_backoff": default.max_backoff_s}
    for key, (_, value_node) in entries.items():
        values[key] = _number(reader, value_node, f"`retry.{key}`", low=0,
                              integer=key == "max_retries", inclusive=key != "max_backoff")
    if values["max_retries"] > 10:
        raise reader.error(node, "`retry.max_retries` may be at most 10")
    return RetrySettings(int(values["max_retries"]), values["backoff_base"],
                         values["max_backoff"])


def endpoint_node(reader: Reader, node: Node, what: str,
                  extra: tuple[str, ...] = (), *, embedding: bool = False) -> Endpoint:
    """Parse a mapping node of endpoint fields (plus ``extra`` keys the caller reads).

    ``embedding`` allows an in-process ``local/<name>`` model (worker/evals/llm/endpoints.py).
    """
    entries = reader.mapping(node, what, ENDPOINT_KEYS + extra)
    values = {k: reader.value(v) for k, (_, v) in entries.items()}

    def fail(message: str) -> ConfigError:
        return reader.error(node, f"{what}: {message}")

    return parse_endpoint(values, fail, embedding=embedding)


def model_target(reader: Reader, node: Node, what: str) -> ModelTarget:
    """Parse ``target: {model, prompt, ...}``."""
    entries = reader.mapping(node, f"{what}: `target`", MODEL_TARGET_KEYS)
    endpoint = endpoint_node(reader, node, f"{what}: `target`",
                             ("prompt", "version", "tools", "max_steps"))
    if "prompt" not in entries:
        raise reader.error(node, f"{what}: `target` with a `model` needs `prompt`, the prompt "
                           "file (a jinja2 template, or a .yaml/.json message list)")
    prompt = repo_path(reader, entries["prompt"][1], "`prompt`")
    version = reader.value(entries["version"][1]) if "version" in entries else ""
    if not isinstance(version, str | int) or isinstance(version, bool):
        raise reader.error(entries["version"][1], "`version` must be a string")
    lines = {key: int(key_node.start_mark.line) + 1 for key, (key_node, _) in entries.items()}
    target = ModelTarget(endpoint, prompt, str(version), int(node.start_mark.line) + 1, lines)
    return agent_fields(reader, entries, target)


def agent_fields(reader: Reader, entries: Entries, target: ModelTarget) -> ModelTarget:
    """Return ``target`` with its ``tools`` and ``max_steps`` (worker/evals/config/tools.py)."""
    from worker.evals.config.tools import parse_max_steps, parse_tools

    changes: dict[str, Any] = {}
    if "tools" in entries:
        changes["tools"] = parse_tools(reader, entries["tools"][1])
    if "max_steps" in entries:
        if "tools" not in entries:
            raise reader.error(entries["max_steps"][0], "`max_steps` limits the model calls of "
                               "an agent: give the target `tools` too, or remove `max_steps`")
        changes["max_steps"] = parse_max_steps(reader, entries["max_steps"][1])
    return replace(target, **changes)


def repo_path(reader: Reader, node: Node, what: str) -> str:
    """Return a normalised relative POSIX path inside the repository, or raise at ``node``."""
    raw = reader.value(node)
    if not isinstance(raw, str) or not raw.strip():
        raise reader.error(node, f"{what} must be a path relative to the repository root")
    normal = posixpath.normpath(raw)
    if raw.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", raw) or "\\" in raw \
            or normal in (".", "..") or normal.startswith("../"):
        raise reader.error(node, f"{what} must be a relative POSIX path inside the repository, "
                           f"got {as_written(node)}")
    return normal


def batch_flag(reader: Reader, entries: Entries) -> bool:
    """Return the command target's ``batch`` flag (default false)."""
    if "batch" not in entries:
        return False
    value = reader.value(entries["batch"][1])
    if not isinstance(value, bool):
        raise reader.error(entries["batch"][1], "`batch` must be true or false")
    return value


def check_models(config: Config) -> Config:
    """Check that every suite-level judge and ``similar`` assertion has a model to call.

    Raises:
        ConfigError: at the assertion's line, when neither it nor ``settings.judge`` /
            ``settings.embedding`` names a model.
    """
    for suite in config.suites:
        for spec in suite.assertions:
            default = config.settings.embedding if spec.type == "similar" \
                else config.settings.judge
            if spec.type in ("llm_judge", "pairwise", "similar", "harmful", "composite",
                             "trajectory_judge") \
                    and "model" not in spec.params and default is None:
                setting = "embedding" if spec.type == "similar" else "judge"
                raise ConfigError(config.path, spec.line, f"assertion `{spec.type}` has no "
                                  f"model: set `model` or `settings.{setting}.model`")
    return config
