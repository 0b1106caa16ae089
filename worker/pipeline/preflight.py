"""Refuse a head at configuration before base sends any call (issue 31).

A head whose calls cannot be made is refused by its configuration, not by a provider: a model
without a known price under base's ``max_cost_usd`` (its spending cannot be bounded), an
``api_key_env`` the worker does not have, an ``api_base`` the worker does not allow, a provider
whose key variable is unset (worker/evals/llm/client.py `refusal`). Before this check, base ran
its calls first (the sides run one after the other under a budget, worker/pipeline/sides.py) and
head was refused only then, so the pull request spent base's budget on a run that could never be
compared. `refuse_head_early` estimates head's run on base's contract and settings (the estimate
head's run itself makes, worker/evals/run/estimate.py) before base starts and raises the error
the run would give.

An endpoint base's config uses too is left to the run: a refused key or ``api_base`` there is
the worker's setup, not the pull request's (worker/evals/verdict/causes.py), and base's calls to
it are refused alike, so none is sent. A file the estimate cannot read is left to the run too,
which reports it where it always did (base's file: a note; head's: head's config error).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from worker.errors import ConfigError
from worker.evals.context import EvalContext
from worker.evals.llm import prepare, refusal
from worker.evals.llm_types import Endpoint, ModelTarget
from worker.evals.run import Judging, RunState, estimate_configs, unpriced_error
from worker.evals.types import Config

_Key = tuple[str, str | None, str | None]


async def refuse_head_early(configs: Sequence[Config], root: Path, base: Config,
                            evals: EvalContext | None,
                            judgings: Sequence[Judging] = ()) -> None:
    """Raise head's configuration error before base's run starts, when head has one.

    Args:
        configs: head's run as the gate makes it (head's target on base's contract, and head's
            own contract where it differs); the first one's settings are base's
            (worker/evals/config/base_settings.py).
        root: head's checkout.
        base: base's config (its endpoints are not head's to answer for).
        evals: the gate's context (the response cache: what it holds counts as called).
        judgings: the judge calls head's run makes after its suites (its estimate's).

    Raises:
        ConfigError: on the line of the target or assertion that calls a model without a known
            price under ``max_cost_usd`` (`worker.evals.run.runner.unpriced_error`), or of the
            endpoint field (``api_key_env``, ``api_base``, ``model``) that makes every call to
            an endpoint only head uses refused before it is sent.
    """
    ctx = (evals or EvalContext()).for_side("head", None)
    state = RunState(configs[0].settings, ctx)
    try:
        planned = await estimate_configs(configs, root, state.caller, True, judgings)
    except ConfigError:
        return  # a file it cannot read: the run reports it where it always did
    limit = configs[0].settings.max_cost_usd
    if limit is not None and planned.unpriced:
        raise unpriced_error(planned.unpriced[0], limit)
    shared = endpoints_of(base)
    for endpoint, use in planned.endpoints:
        if _key(endpoint) in shared:
            continue
        await prepare(endpoint, sending=False)  # litellm off the loop, if its check needs it
        refused = refusal(endpoint, os.environ)
        if refused is not None:
            line = _field_line(configs, endpoint, refused.field) or use.line
            raise ConfigError(use.path, line, f"{use.what}: {refused.message}: no call to it "
                              "can be made, so neither base nor head was run")


def endpoints_of(config: Config) -> set[_Key]:
    """Return (model, ``api_base``, ``api_key_env``) of every endpoint ``config`` names: its
    targets', its default judge's and embedding model's (as worker/evals/verdict/causes.py)."""
    found = {_key(s.target.endpoint) for s in config.suites if isinstance(s.target, ModelTarget)}
    found.update(_key(e) for e in (config.settings.judge, config.settings.embedding)
                 if e is not None)
    return found


def _key(endpoint: Endpoint) -> _Key:
    return endpoint.model, endpoint.api_base, endpoint.api_key_env


def _field_line(configs: Sequence[Config], endpoint: Endpoint, field: str) -> int | None:
    """The line of ``field`` (else ``model``) of the first target that calls ``endpoint``, or
    None (a judge's or embedding model's: its use's line is annotated)."""
    for config in configs:
        for suite in config.suites:
            target = suite.target
            if isinstance(target, ModelTarget) and _key(target.endpoint) == _key(endpoint):
                return target.lines.get(field, target.lines.get("model", target.line))
    return None
