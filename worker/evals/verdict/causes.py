"""Put every model-call error of a gate run down to its cause: the pull request, or not (pure).

An example whose target call got no answer (error kinds ``rate_limited``, ``provider``,
``timeout``) or was not sent (``budget``) is put down to one `ErrorCause`:

- ``limit``: not sent because base's ``max_cost_usd`` or ``max_duration`` was reached (kind
  ``budget``), at either side.
- At **base**: ``outside``, whatever the error. Base is merged code; when it cannot run, the
  pull request cannot be judged against it.
- At **head**, an error no retry can fix (`ExampleResult.error_field` is set, see
  worker/evals/llm/client.py):

  - on an endpoint base does not use (no target, ``settings.judge`` or ``settings.embedding``
    of base's config has the same ``model``, ``api_base`` and ``api_key_env``): ``head``.
    The pull request introduced or changed what fails: a provider whose key the worker lacks,
    an ``api_key_env`` that is unset, an ``api_base`` the worker refuses, an unknown model.
  - on an endpoint base uses too: a refused request (``request``: 400, 413, 422 on the
    prompt or parameters) is ``head``'s unless base's run shows one on that endpoint too; a
    missing or refused key, a refused ``api_base`` or a model the provider does not have
    (``api_key_env``, ``api_base``, ``model``) is the worker's or the provider's:
    ``outside`` (head did not change what fails).

- At **head**, a transient error (429, 5xx, timeout, connection refused or dropped):
  ``outside`` on an endpoint base uses too, or when there is no base config to compare with
  (provider trouble cannot be told from a change then); ``head`` on an endpoint only head
  uses (a server of the pull request's that refuses connections is the pull request's).
  When base's run was answered on that shared endpoint and head's share of such errors (or of
  the worker's and provider's permanent ones above: a 401 or 404 to head's calls only) on it
  exceeds base's by more than ``max_provider_error_rate`` (base's tolerance), the endpoint is
  in `Attribution.failing_for_head`: the cause stays ``outside`` (an outage that began after
  base's calls looks the same), but a prompt or parameters that make every call time out, or
  a provider that answers 500 or 429 to head's requests only, is as likely: such a run is
  undecided and never ``neutral`` (worker/evals/verdict/health.py).

A target that gave no answer (error kind ``target``: a command target crashed, exited
non-zero, timed out or wrote no valid output) is no call error. At head it is scored as a
failure (a regression where base passed) and needs no cause, unless base ran no such suite (no
base given, none at base, or a suite the pull request adds): then nothing could show it as a
regression, and it is ``head``'s (fail closed: a run whose every example crashed passed
silently when it had no rules). At **base** it is ``outside``, as base's call errors are: base could
not be evaluated on that example, so it has no verdict there (worker/evals/verdict/
base_targets.py), whatever the cause, a process of the pull request's among them. What each
cause does to the check is worker/evals/verdict/health.py's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Literal

from worker.evals.llm_types import Endpoint, ModelTarget
from worker.evals.types import (
    Config,
    ErrorCause,
    ExampleResult,
    RunError,
    RunResult,
    SuiteConfig,
)
from worker.evals.verdict.base_targets import no_answer

#: Error kinds of a call that got no answer.
CALL_KINDS = ("rate_limited", "provider", "timeout")
#: Fields whose permanent failure on an endpoint base shares is the worker's or provider's.
SETUP_FIELDS = ("api_key_env", "api_base", "model")
#: Longest error message kept in a `RunError`, characters.
MAX_MESSAGE_CHARS = 500

_Key = tuple[str, str | None, str | None]
Side = Literal["head", "base"]


def endpoint_key(endpoint: Endpoint) -> _Key:
    """Return what makes two endpoints the same place to send calls: model, base URL, key."""
    return endpoint.model, endpoint.api_base, endpoint.api_key_env


class Attribution:
    """The causes of one gate run's call errors (rules in the module docstring).

    Args:
        head_config: the config head ran (its suites and targets).
        base_config: base's config, or None (none, or invalid).
        base: base's run, or None.
    """

    def __init__(self, head_config: Config, base_config: Config | None,
                 base: RunResult | None, head: RunResult | None = None) -> None:
        self.head_config = head_config
        self.base_config = base_config
        self.base_suites = set(base.suites) if base is not None else set()
        self.shared = _endpoints(base_config) if base_config is not None else set()
        self.refused_at_base = _refused(base, base_config)
        self.failing_for_head = _failing_for_head(
            head, head_config, base, base_config, head_config.settings.max_provider_error_rate)

    def cause(self, side: str, suite: str, example: ExampleResult) -> ErrorCause | None:
        """Return the cause of ``example``'s call error (or, at base, target error) at
        ``side``, or None when it has none."""
        if side == "base" and no_answer(example):
            return "outside"  # base's own target could not answer: no verdict at base
        if side == "head" and no_answer(example) and suite not in self.base_suites:
            return "head"  # no base result to compare with: head's own target failed
        if not example.errored or example.error_kind not in (*CALL_KINDS, "budget"):
            return None
        if example.error_kind == "budget":
            return "limit"
        if side == "base":
            return "outside"
        key = _target_key(self.head_config, suite)
        if key is None:
            return "outside"
        if self.base_config is None:
            return "head" if example.error_field else "outside"
        if key not in self.shared:
            return "head"
        if example.error_field == "request":
            return "outside" if key in self.refused_at_base else "head"
        return "outside"

    def head_only(self, suite: str) -> bool:
        """Whether ``suite``'s target endpoint answered base's run but fails head's far more
        often (`failing_for_head`)."""
        return _target_key(self.head_config, suite) in self.failing_for_head

    def errors(self, head: RunResult, base: RunResult | None) -> tuple[RunError, ...]:
        """Return the first call error (and base's first target error) of each kind,
        permanence and cause per suite and side.

        Head's errors of cause ``head`` carry the config line that set what failed.
        """
        found: dict[tuple[str, str, str, bool, str], RunError] = {}
        for side, suite, example, cause in self.each(head, base):
            assert example.error_kind is not None  # a call error has a kind
            group = (side, suite, example.error_kind, bool(example.error_field), cause)
            first = found.get(group)
            if first is not None:
                found[group] = replace(first, count=first.count + 1)
                continue
            path, line, field = self._where(suite, example) if cause == "head" \
                else (self.head_config.path, None, "")
            found[group] = RunError(side, suite, example.error_kind, bool(example.error_field),
                                    cause, 1, example.id, _clip(example.error or ""), path,
                                    line, field)
        return tuple(found.values())

    def each(self, head: RunResult, base: RunResult | None,
             ) -> Iterator[tuple[Side, str, ExampleResult, ErrorCause]]:
        """Yield ``(side, suite, example, cause)`` of every example with a call error, and of
        every base example whose target gave no answer."""
        sides: tuple[tuple[Side, RunResult | None], ...] = (("head", head), ("base", base))
        for side, run in sides:
            if run is None:
                continue
            for name, suite in run.suites.items():
                for example in suite.examples:
                    cause = self.cause(side, name, example)
                    if cause is not None:
                        yield side, name, example, cause

    def _where(self, suite: str, example: ExampleResult) -> tuple[str, int | None, str]:
        """The config path, line and field that set what failed at head."""
        config = _suite(self.head_config, suite)
        target = config.target if config is not None else None
        if not isinstance(target, ModelTarget):
            return self.head_config.path, None, ""
        field = example.error_field or ("api_base" if target.endpoint.api_base else "model")
        lookup = "prompt" if field == "request" else field
        line = target.lines.get(lookup, target.lines.get("model", target.line))
        return self.head_config.path, line, field


def _suite(config: Config, name: str) -> SuiteConfig | None:
    return next((s for s in config.suites if s.name == name), None)


def _target_key(config: Config | None, suite: str) -> _Key | None:
    found = _suite(config, suite) if config is not None else None
    if found is None or not isinstance(found.target, ModelTarget):
        return None
    return endpoint_key(found.target.endpoint)


def _endpoints(config: Config) -> set[_Key]:
    """Every endpoint ``config`` sends calls to: targets, the default judge and embedding."""
    keys = {endpoint_key(s.target.endpoint) for s in config.suites
            if isinstance(s.target, ModelTarget)}
    keys.update(endpoint_key(e) for e in (config.settings.judge, config.settings.embedding)
                if e is not None)
    return keys


def _refused(base: RunResult | None, config: Config | None) -> set[_Key]:
    """The endpoints on which base's run had a request refused (``request`` errors)."""
    if base is None or config is None:
        return set()
    return {key for name, suite in base.suites.items()
            if (key := _target_key(config, name)) is not None
            and any(e.error_field == "request" for e in suite.examples)}


def _transient_shares(run: RunResult | None, config: Config | None,
                      ) -> dict[_Key, tuple[int, int]]:
    """Per endpoint of ``run``'s targets: (examples with a call error but a refused request,
    examples)."""
    shares: dict[_Key, tuple[int, int]] = {}
    if run is None or config is None:
        return shares
    for name, suite in run.suites.items():
        key = _target_key(config, name)
        if key is None:
            continue
        failed, total = shares.get(key, (0, 0))
        failed += sum(1 for e in suite.examples if e.errored and e.error_field != "request"
                      and e.error_kind in CALL_KINDS)
        shares[key] = (failed, total + len(suite.examples))
    return shares


def _failing_for_head(head: RunResult | None, head_config: Config, base: RunResult | None,
                      base_config: Config | None, tolerance: float) -> set[_Key]:
    """Shared endpoints that answered base's run but fail head's far more often: head's share
    of transient call errors there exceeds base's by more than ``tolerance`` (fraction 0-1)."""
    at_base = _transient_shares(base, base_config)
    found = set()
    for key, (failed, total) in _transient_shares(head, head_config).items():
        base_failed, base_total = at_base.get(key, (0, 0))
        if not total or not base_total or base_failed == base_total:
            continue
        if failed / total - base_failed / base_total > tolerance:
            found.add(key)
    return found


def _clip(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS - 1] + "…"
