"""Read what each tool printed, so the bench checks that a run did the whole job.

The fake provider's own count of calls is the first check (bench/peers/__main__.py); these
are the second: each tool's own account of its run (llmgate's report, llmci's report table,
promptfoo's summary), so a tool that exits 0 having skipped or failed examples is caught.
"""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LLMGATE_CALLS = re.compile(r"^- Model calls at (head|base): (\d+) provider calls, (\d+) cache "
                            r"hits", re.MULTILINE)
_LLMCI_ROW = re.compile(r"^\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|\s*([0-9.]+)\s*\|", re.MULTILINE)
_PROMPTFOO_COUNT = re.compile(r"(\d+) (passed|failed|errors?) \(")
_PROMPTFOO_CONCURRENCY = re.compile(r"\(concurrency: (\d+)\)")
_LLMCI_ERRORS = re.compile(r"(\d+) of (\d+) examples had target errors")
_LLMGATE_LOST = re.compile(r"Call errors at head in .+?: (\d+) examples?\b")


def plain(text: str) -> str:
    """Return ``text`` without ANSI colour codes."""
    return _ANSI.sub("", text)


def llmgate_calls(report: str) -> dict[str, tuple[int, int]]:
    """Return ``{side: (provider calls, cache hits)}`` from llmgate's markdown report
    (``side`` is ``head`` or ``base``); empty when the report names none."""
    return {m[1]: (int(m[2]), int(m[3])) for m in _LLMGATE_CALLS.finditer(plain(report))}


def llmci_scores(report: str) -> dict[tuple[str, str], float]:
    """Return ``{(eval, metric): score}`` from llmci's markdown report table (a metric with
    two thresholds appears once)."""
    return {(m[1], m[2]): float(m[3]) for m in _LLMCI_ROW.finditer(plain(report))
            if m[1] not in ("Eval", "------")}


def llmci_target_errors(report: str) -> int:
    """Return the examples llmci's report says had target errors (no answer: a provider error
    after its retries). Its accuracy leaves them out, so a run with them can show 1.000."""
    found = _LLMCI_ERRORS.search(plain(report))
    return int(found[1]) if found else 0


def promptfoo_summary(output: str) -> dict[str, int]:
    """Return promptfoo's closing counts ``{"passed", "failed", "errors", "concurrency"}``
    (a count it does not print is missing)."""
    text = plain(output)
    counts = {("errors" if m[2].startswith("error") else m[2]): int(m[1])
              for m in _PROMPTFOO_COUNT.finditer(text)}
    concurrency = _PROMPTFOO_CONCURRENCY.search(text)
    if concurrency:
        counts["concurrency"] = int(concurrency[1])
    return counts


def whole_job(tool: str, output: str, examples: int, sides: int) -> str | None:
    """Return why ``output`` does not show ``examples`` examples passed on each of ``sides``
    sides (1 or 2) by ``tool`` (``llmgate``, ``llmci`` or ``promptfoo``), or None when it does.

    For llmgate both sides are in one report; for the peers each command prints one side and
    this is called once per command with ``sides=1``.
    """
    if tool.startswith("llmgate"):
        found = llmgate_calls(output)
        want = ("head", "base")[:sides]
        totals = {side: sum(found.get(side, (0, 0))) for side in want}
        bad = {side: total for side, total in totals.items() if total != examples}
        return f"llmgate answered {totals} examples, expected {examples} per side" if bad \
            else None
    if tool == "llmci":
        score = llmci_scores(output).get(("tickets", "accuracy"))
        lost = llmci_target_errors(output)
        if lost:
            return f"llmci: {lost} examples had target errors (no answer), accuracy {score}"
        return None if score == 1.0 else f"llmci accuracy {score}, expected 1.000"
    summary = promptfoo_summary(output)
    if summary.get("passed") != examples or summary.get("failed") or summary.get("errors"):
        return f"promptfoo summary {summary}, expected {examples} passed"
    return None


def answered(tool: str, output: str, examples: int) -> int | None:
    """Return how many of ``examples`` examples ``tool`` says it answered at head (one side),
    or None when its output does not say (it crashed before its report).

    llmgate: ``examples`` less those its report's "Call errors at head" lines count (its
    provider calls count retries, so they are no measure of answers); llmci: ``examples`` less
    its target errors (its accuracy leaves them out), when it printed its report table;
    promptfoo: its passed count (every answer passes the check).
    """
    if tool.startswith("llmgate"):
        text = plain(output)
        if "head" not in llmgate_calls(text):
            return None
        return examples - sum(int(m[1]) for m in _LLMGATE_LOST.finditer(text))
    if tool == "llmci":
        if ("tickets", "accuracy") not in llmci_scores(output):
            return None
        return examples - llmci_target_errors(output)
    return promptfoo_summary(output).get("passed")
