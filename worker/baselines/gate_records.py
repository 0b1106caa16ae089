"""What a pull request gate's history record keeps besides its suites (pure; no I/O).

worker/baselines/timeline.py writes, with a gate's suites (worker/baselines/timeline_records.py):

- its judges' agreement with people (`judge_records`), where base's ``judge:`` rules ran head's
  changed judge on the labelled set (worker/pipeline/judge_trust.py);
- the outputs of the examples whose status differs between base and head or that fail at head
  (`output_records`), redacted and bounded (`MAX_OUTPUT_CHARS`, `MAX_OUTPUT_EXAMPLES`).

Shapes of worker/history_contract.py (`JudgeRecord`, `OutputRecord`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence

from worker.baselines.timeline_records import example_status, scoped_suite
from worker.evals.score import as_text
from worker.evals.types import ExampleResult, GateReport, SuiteResult
from worker.history_contract import (
    ERRORED,
    FAILED,
    MAX_OUTPUT_CHARS,
    MAX_OUTPUT_EXAMPLES,
    PASSED,
    JudgeRecord,
    OutputRecord,
    encode_examples,
    output_field,
)

#: The report's metric of a judge's agreement (worker/evals/verdict/judge_trust.py
#: `metric_name`): ``judge agreement (<criterion>)``.
_JUDGE_METRIC = re.compile(r"judge agreement \((?P<criterion>.*)\)\Z", re.S)
#: Worst first: the status a judge's record keeps among its rules'.
_JUDGE_STATUS = ("fail", "inconclusive", "pass")
#: Which changes of an example's status are recorded with its outputs, in this order.
_CHANGES = ("regressed", "failing", "fixed")


def judge_records(report: GateReport, folder: str = "") -> list[JudgeRecord]:
    """Return the judges' agreement with people that ``report`` measured (its ``judge
    agreement (<criterion>)`` rule outcomes, worker/pipeline/judge_trust.py), one record per
    suite and criterion; Cohen's kappa and n from the report's ``judge_agreement`` (the
    calibration's figures; None where it has none). Suites of a folder's config are named
    ``<folder>: <suite>``."""
    measured = {(a.suite, a.criterion): a for a in report.judge_agreement}
    found: dict[tuple[str, str], JudgeRecord] = {}
    for o in report.outcomes:
        matched = _JUDGE_METRIC.match(o.metric)
        if matched is None:
            continue
        key = (o.suite, matched["criterion"])
        record = found.get(key)
        if record is None:
            figures = measured.get(key)
            record = found[key] = JudgeRecord(
                suite=scoped_suite(folder, o.suite), criterion=key[1], agreement=None,
                reference=None, kappa=_finite(figures.kappa) if figures else None,
                n=figures.n if figures else None, status="pass")
        if record["agreement"] is None:  # an undecided rule has none; another rule may
            record["agreement"] = _finite(o.head)
        if record["reference"] is None:
            record["reference"] = _finite(o.base)
        if o.status in _JUDGE_STATUS and \
                _JUDGE_STATUS.index(o.status) < _JUDGE_STATUS.index(record["status"]):
            record["status"] = o.status
    return list(found.values())


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def _text_of(result: ExampleResult | None, redact: Callable[[str], str]) -> tuple[str, int]:
    """An output as recorded: redacted text (JSON for non-strings, ``error: <text>`` for a
    target error) cut to `MAX_OUTPUT_CHARS`, and its length before the cut."""
    if result is None:
        return "", 0
    if result.output is None and result.error:
        text = f"error: {result.error}"
    else:
        text = "" if result.output is None else as_text(result.output)
    text = redact(text)
    return text[:MAX_OUTPUT_CHARS], len(text)


def _change(base: int | None, head: int | None) -> str | None:
    """Which recorded change a status pair is (`_CHANGES`), or None (not recorded)."""
    if base == PASSED and head in (FAILED, ERRORED):
        return "regressed"
    if head in (FAILED, ERRORED):
        return "failing"
    if base in (FAILED, ERRORED) and head == PASSED:
        return "fixed"
    return None


def _changed_examples(base: SuiteResult | None, head: SuiteResult,
                      ) -> Iterator[tuple[str, str, list[ExampleResult], list[ExampleResult]]]:
    """(change, id, base draws, head draws) of each example of ``head`` that is recorded."""
    base_draws: dict[str, list[ExampleResult]] = {}
    for example in (base.examples if base is not None else ()):
        base_draws.setdefault(example.id, []).append(example)
    head_draws: dict[str, list[ExampleResult]] = {}
    for example in head.examples:
        head_draws.setdefault(example.id, []).append(example)
    for example_id, draws in head_draws.items():
        before = base_draws.get(example_id)
        change = _change(example_status(before) if before else None, example_status(draws))
        if change is not None:
            yield change, example_id, before or [], draws


def output_records(folder: str, report: GateReport,
                   redact: Callable[[str], str]) -> list[OutputRecord]:
    """Return the outputs a pull request gate records: per suite of head, the examples whose
    status differs between base and head or that fail at head (`_CHANGES` order, dataset
    order within), at most `MAX_OUTPUT_EXAMPLES`, each side's first draw's output passed
    through ``redact`` and cut to `MAX_OUTPUT_CHARS` (`OutputRecord`)."""
    if report.head is None:
        return []
    bases = report.base.suites if report.base is not None else {}
    found: list[OutputRecord] = []
    for result in report.head.suites.values():
        chosen = sorted(_changed_examples(bases.get(result.name), result),
                        key=lambda c: _CHANGES.index(c[0]))[:MAX_OUTPUT_EXAMPLES]
        for change, example_id, before, draws in chosen:
            base_text, base_chars = _text_of(before[0] if before else None, redact)
            head_text, head_chars = _text_of(draws[0], redact)
            found.append(OutputRecord(
                suite=scoped_suite(folder, result.name), example_id=example_id, change=change,
                base_status=example_status(before) if before else None,
                head_status=example_status(draws),
                base=base_text, head=head_text, base_chars=base_chars, head_chars=head_chars))
    return found


def output_fields(records: Sequence[OutputRecord]) -> list[str | bytes]:
    """Return the examples hash pairs of ``records`` (`output_field` -> encoded record)."""
    blobs: list[str | bytes] = []
    for record in records:
        blobs += [output_field(record["suite"], record["example_id"]), encode_examples(record)]
    return blobs
