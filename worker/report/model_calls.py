"""Report lines about model calls: cost, cache, estimate, errors, judges, traps, pairwise (pure).

`run_lines` gives the lines the check summary and the PR comment show under "Model calls",
among them the first call error of each kind per suite and side with its text and cause
(`error_line`); `usage_json` the same facts for ``llmgate run --format json`` (the stored
run). Money is shown as USD with 4 decimals (``$0.0024``), the figure stored in
`RunResult.spend`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from worker.evals.types import GateReport, RunError, RunResult, SuiteResult

Inline = Callable[[Any, int], str]


def usd(value: float) -> str:
    """Format USD with 4 decimals, e.g. ``$0.0024``."""
    return f"${value:.4f}"


def spend_line(side: str, run: RunResult) -> str | None:
    """Return ``Model calls at head: ...`` for a run that called a model, else None."""
    spend = run.spend
    if not spend.provider_calls and not spend.cache_hits:
        return None
    tokens = spend.tokens
    written = f", {tokens.cache_write} written to it" if tokens.cache_write else ""
    line = (f"Model calls at {side}: {spend.provider_calls} provider calls, "
            f"{spend.cache_hits} cache hits, {tokens.input} tokens in "
            f"({tokens.cached_input} cached by the provider{written}), {tokens.output} out, "
            f"{usd(spend.cost_usd)} spent")
    if spend.unpriced_calls:
        line += (f" ({spend.unpriced_calls} calls of unknown cost not counted: a model without "
                 "a known price, or an answer without usage)")
    return line


def _estimate_line(side: str, run: RunResult) -> str | None:
    estimate = run.estimate
    if estimate is None or not (estimate.calls or estimate.cached_calls):
        return None
    cost = "unknown" if estimate.cost_usd is None else usd(estimate.cost_usd)
    return (f"Estimated before the run at {side}: {estimate.calls} calls "
            f"({estimate.cached_calls} cached), ~{estimate.tokens_in} tokens in, "
            f"~{estimate.tokens_out} out, {cost}")


def _suite_lines(side: str, suite: SuiteResult) -> list[str]:
    lines = []
    traps = suite.traps
    if traps is not None:
        missed = f"; missed: {', '.join(traps.missed_ids[:10])}" if traps.missed_ids else ""
        lines.append(f"{suite.name}: the judge caught {traps.caught} of {traps.total} trap cases "
                     f"at {side} ({traps.errors} judge errors){missed}")
    if suite.pairwise:
        judged = [p for p in suite.pairwise if p.score is not None]
        rate = suite.metrics.get("win_rate")
        shown = "n/a" if rate is None else f"{rate:.3f}"
        lines.append(f"{suite.name}: head vs base win rate {shown} over {len(judged)} examples "
                     f"(both orders; {len(suite.pairwise) - len(judged)} judge errors)")
    split = sum(1 for e in suite.examples for a in e.assertions
                if a.details.get("disagreement", 0) and len(a.details.get("votes", ())) > 1)
    if split:
        lines.append(f"{suite.name}: the judge quorum disagreed on {split} judgements at {side}")
    return lines


#: What each cause of a run error is called in the report.
CAUSE_TEXT = {"head": "caused by the head", "outside": "not caused by the pull request",
              "limit": "not sent: base's budget or time limit"}
_KIND_TEXT = {"rate_limited": "rate limited", "timeout": "timed out", "budget": "not sent",
              "target": "without an answer from the target (it crashed, exited non-zero, "
                        "timed out or wrote no valid output)"}


def error_line(error: RunError) -> str:
    """Return one line about a run error, e.g. ``Call errors at head in tickets: 5 examples
    provider error (no retry can fix it), caused by the head (api_key_env at .llmgate.yml:9);
    the first, t1: ...``."""
    kind = _KIND_TEXT.get(error.kind, "provider error")
    lasting = " (no retry can fix it)" if error.permanent else ""
    where = (f" ({error.field} at {error.path}:{error.line})"
             if error.line is not None else "")
    examples = f"{error.count} example{'s' if error.count != 1 else ''}"
    what = "Target errors" if error.kind == "target" else "Call errors"  # base's only
    return (f"{what} at {error.side} in {error.suite}: {examples} {kind}{lasting}, "
            f"{CAUSE_TEXT[error.cause]}{where}; the first, {error.example_id}: {error.message}")


def run_lines(report: GateReport, inline: Inline) -> list[str]:
    """Return the escaped markdown lines about model calls for the summary and the comment."""
    errors = [inline(error_line(e), 900) for e in report.errors[:20]]
    lines: list[str] = []
    for side, run in (("head", report.head), ("base", report.base)):
        if run is None:
            continue
        for line in (spend_line(side, run), _estimate_line(side, run)):
            if line is not None:
                lines.append(line)
        for suite in run.suites.values():
            lines.extend(_suite_lines(side, suite))
    return [*errors, *(inline(line, 600) for line in lines[:40])]


def usage_json(report: GateReport) -> dict[str, Any]:
    """Return ``{"head": {...} | None, "base": ...}``: spend, estimate and why a run stopped
    (the run errors are the report's ``errors``, `worker.report.render.render_json`)."""
    def side(run: RunResult | None) -> dict[str, Any] | None:
        if run is None:
            return None
        return {"spend": asdict(run.spend),
                "estimate": None if run.estimate is None else asdict(run.estimate),
                "stopped": run.stopped}

    return {"head": side(report.head), "base": side(report.base)}
