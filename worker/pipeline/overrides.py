"""The command line's changes to a config: ``--suite``, ``--smoke`` and ``--samples``.

``llmgate run`` applies them to head's and base's config alike (worker/pipeline/trees.py), so
the two sides stay comparable: the same suites, the same first examples, the same repeats.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from worker.errors import ConfigError
from worker.evals.context import RunOverrides
from worker.evals.types import Config, SuiteConfig


def apply_overrides(config: Config, overrides: RunOverrides) -> Config:
    """Return ``config`` with only the suites ``overrides.suites`` names (all when empty),
    each limited to its first ``overrides.smoke`` examples, and ``settings.repeats`` set to
    ``overrides.samples`` when given (pure)."""
    suites = tuple(replace(s, smoke=overrides.smoke) if overrides.smoke else s
                   for s in config.suites
                   if not overrides.suites or s.name in overrides.suites)
    settings = replace(config.settings, repeats=overrides.samples) if overrides.samples \
        else config.settings
    return replace(config, suites=suites, settings=settings)


def check_suites(config: Config, overrides: RunOverrides) -> None:
    """Refuse a ``--suite`` that names no suite of ``config`` (head's).

    Raises:
        ConfigError: naming the unknown suites and the config's own, at no line.
    """
    known = [s.name for s in config.suites]
    unknown = [name for name in overrides.suites if name not in known]
    if unknown:
        raise ConfigError(config.path, None, no_such_suite(unknown, known, config.path))


def suite_named(config: Config, name: str) -> SuiteConfig:
    """Return the suite of ``config`` that ``--suite name`` names.

    Raises:
        ConfigError: no suite of ``config`` has that name (naming the config's own, at no line).
    """
    for suite in config.suites:
        if suite.name == name:
            return suite
    raise ConfigError(config.path, None,
                      no_such_suite([name], [s.name for s in config.suites], config.path))


def no_such_suite(unknown: Sequence[str], known: Sequence[str], where: str) -> str:
    """Return the one line that refuses ``--suite`` names ``where`` (a config, a record) lacks.

    Every command taking ``--suite`` says it so: ``--suite nope: no such suite in .llmgate.yml
    (its suites: a, b)`` (``none`` for no suites).
    """
    return (f"--suite {', '.join(unknown)}: no such suite in {where} "
            f"(its suites: {', '.join(known) or 'none'})")
