"""Text helpers shared by the machine-readable and terminal reports (pure).

Untrusted text (model outputs, dataset values, suite names) goes into XML, SARIF, workflow
commands and a terminal. Each of those breaks on some characters: XML 1.0 forbids most control
characters (W3C XML 1.0, section 2.2 "Characters"), and a terminal obeys escape sequences, so a
model output could rewrite what a person sees. `printable` removes them all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from worker.evals.types import ExampleResult, GateReport, Regression
from worker.pipeline import MultiReport
from worker.report.markdown import as_text

#: Characters XML 1.0 does not allow, and the C0/C1 controls but tab and newline.
_UNPRINTABLE = re.compile("[^\t\n\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def printable(text: str) -> str:
    """Return ``text`` with every control character but tab and newline (escape sequences
    included) and every character XML 1.0 forbids replaced by U+FFFD; ``\\r\\n`` becomes
    ``\\n``."""
    return _UNPRINTABLE.sub("\ufffd", text.replace("\r\n", "\n"))


def one_line(text: str, limit: int) -> str:
    """Return `printable` ``text`` on one line (whitespace runs become one space), at most
    ``limit`` characters (an ellipsis ends a cut)."""
    flat = " ".join(printable(text).split())
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)] + "…"


def reports(multi: MultiReport) -> Iterator[tuple[str, GateReport]]:
    """Yield ``(name prefix, report)`` per config: "" for a lone config, else its path and
    ``" "``, so names stay unique across configs."""
    for config in multi.configs:
        yield (f"{config.path} " if multi.several else ""), config.report


def first_per_id(examples: tuple[ExampleResult, ...]) -> dict[str, list[ExampleResult]]:
    """Group a suite's results by example id, dataset order (repeats share an id)."""
    grouped: dict[str, list[ExampleResult]] = {}
    for example in examples:
        grouped.setdefault(example.id, []).append(example)
    return grouped


def regressed(report: GateReport) -> dict[tuple[str, str], Regression]:
    """Return ``(suite, example id) -> Regression`` for every regressed example of ``report``."""
    return {(r.suite, r.example_id): r for r in report.regressions}


def value_text(value: Any) -> str:
    """Return an output or expected value as printable text (JSON for non-strings)."""
    return printable(as_text(value))


def run_sha(multi: MultiReport, side: str) -> str:
    """Return the first ``side`` (``head`` or ``base``) run's commit among the configs, or ""."""
    for _, report in reports(multi):
        run = report.head if side == "head" else report.base
        if run is not None and run.sha:
            return run.sha
    return ""
