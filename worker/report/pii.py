"""Redact the findings of ``pii`` assertions from a whole report before it is rendered.

A ``pii`` assertion's own message and details never hold a found value, but the report also
quotes outputs (failed examples, regressions, annotations' raw details). `redact_pii` finds the
categories every ``pii`` result of the report scanned for and replaces each value of them, in
every string of the report, with ``[REDACTED <category>]`` (worker/security/pii.py), so neither
the check run, the comment, the stored report nor ``llmgate run``'s markdown or JSON shows one.
A report without a ``pii`` result is returned unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, TypeVar

from worker.evals.types import AssertionResult
from worker.security import CATEGORIES, COUNTRIES, PiiRedactor, Redactor

T = TypeVar("T")


def redact_report(report: T, redactor: Redactor) -> T:
    """Return a copy of ``report`` as every report leaves llmgate: the secrets ``redactor``
    knows (the worker's or the environment's provider keys) replaced first, then what its
    ``pii`` assertions found (`redact_pii`). The gate's check run and comment, a push's stored
    report and ``llmgate run``'s output all take this one path."""
    return redact_pii(redactor.redact_value(report))


def redact_pii(report: T) -> T:
    """Return a copy of ``report`` (any frozen dataclass, e.g. a ``MultiReport``) with every
    value of the categories its ``pii`` assertions scanned for redacted."""
    categories: set[str] = set()
    countries: set[str] = set()
    for result in _pii_results(report, 0):
        categories.update(result.details.get("categories", CATEGORIES))
        countries.update(result.details.get("countries", COUNTRIES))
    if not categories:
        return report
    return PiiRedactor(categories, sorted(countries)).redact_value(report)


def _pii_results(value: Any, depth: int) -> Iterator[AssertionResult]:
    if depth > 64 or isinstance(value, str | int | float | bool) or value is None:
        return
    if isinstance(value, AssertionResult):
        if value.type == "pii":
            yield value
        return
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        for item in value:
            yield from _pii_results(item, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _pii_results(getattr(value, f.name), depth + 1)
