"""Score target outputs with every kind of assertion and make the example results.

Basic and structured assertions are pure; ``llm_judge`` and ``similar`` call models (through the
run's `ModelCaller`, concurrently); ``python`` assertions run as one batch per suite and
assertion once every output is in; ``pairwise`` is left to worker/evals/score/pairwise.py.

An example passes when its target answered and every assertion passed. It is *unscored*
(neither a pass nor a failure, left out of pass rates) when its target's call failed for a
reason that is not the model's (rate limited, provider error, timeout, not sent for budget) or
an assertion errored (a judge error). When the target errored, its assertions are recorded as
failed with `NOT_CHECKED`. An assertion whose value is NaN or infinite (a custom assertion's
return value, a similarity of broken vectors) makes the example errored (kind ``not_finite``,
the reason naming the assertion and the value): counted as failed in every rate and mean,
never left out of them, whatever else errored.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from worker.errors import ConfigError
from worker.evals.llm import ModelCaller
from worker.evals.llm_types import UNSCORED_KINDS, RunUsage
from worker.evals.score import agent, assertions, safety, structured
from worker.evals.score.composite import run_composite
from worker.evals.score.consistency import annotate
from worker.evals.score.custom import run_python
from worker.evals.score.judges import JUDGE_TYPES, judge_spec, run_judge
from worker.evals.score.kinds import RUN_TYPES
from worker.evals.score.retrieval import RETRIEVAL_TYPES, check_retrieval
from worker.evals.score.similar import check_similar
from worker.evals.score.trajectory_judge import TRAJECTORY_TEMPLATE_VERSION, run_trajectory_judge
from worker.evals.types import (
    CONFIG_FILENAME,
    AssertionResult,
    AssertionSpec,
    Example,
    ExampleResult,
    Settings,
    TargetOutput,
)

#: Message of each assertion of an example whose target failed (the assertion counts as failed).
NOT_CHECKED = "not checked: the target failed for this example"


@dataclass(frozen=True)
class Item:
    """One (example, draw) to score: its output and whether the cache may be used."""

    example: Example
    output: TargetOutput
    repeat: int = 0
    use_cache: bool = True


async def score_items(suite_specs: Sequence[AssertionSpec], items: Sequence[Item], root: Path,
                      settings: Settings, caller: ModelCaller,
                      dataset: str) -> list[ExampleResult]:
    """Score every item (see the module docstring); results in the order of ``items``.

    Raises:
        ConfigError: an assertion has no model to call, or a custom assertion's file is missing.
    """
    partial = await asyncio.gather(*(
        _score_one(suite_specs, item, settings, caller, dataset) for item in items))
    await _fill_python(suite_specs, items, partial, root, settings)
    return annotate([_finish(item, results, spend)
                     for item, (results, spend) in zip(items, partial, strict=True)])


def specs_of(suite_specs: Sequence[AssertionSpec], example: Example) -> list[AssertionSpec]:
    """Return the per-example assertions to check: the suite's and the example's own, without
    the run-level ones (``pairwise``)."""
    return [s for s in (*suite_specs, *example.assertions) if s.type not in RUN_TYPES]


_Partial = tuple[list[AssertionResult | None], RunUsage]


async def _score_one(suite_specs: Sequence[AssertionSpec], item: Item, settings: Settings,
                     caller: ModelCaller, dataset: str) -> _Partial:
    specs = specs_of(suite_specs, item.example)
    if item.output.error is not None:
        return [AssertionResult(s.type, False, 0.0, NOT_CHECKED) for s in specs], RunUsage()
    checked = await asyncio.gather(*(
        _check(spec, item, settings, caller, dataset) for spec in specs))
    spend = RunUsage()
    for _, used in checked:
        spend = spend + used
    return [result for result, _ in checked], spend


async def _check(spec: AssertionSpec, item: Item, settings: Settings, caller: ModelCaller,
                 dataset: str) -> tuple[AssertionResult | None, RunUsage]:
    example = item.example

    def fail(message: str) -> ConfigError:
        path = dataset if spec in example.assertions else CONFIG_FILENAME
        return ConfigError(path, spec.line, f"assertion `{spec.type}`: {message}")

    if spec.type in _MODEL_CHECKED:
        return await _check_model(spec, item, settings, caller, fail)
    if spec.type == "python":
        return None, RunUsage()
    return _check_pure(spec, item), RunUsage()


#: Assertion types whose check calls a model (a judge or an embedding).
_MODEL_CHECKED = (*JUDGE_TYPES, "composite", "trajectory_judge", "similar")


async def _check_model(spec: AssertionSpec, item: Item, settings: Settings, caller: ModelCaller,
                       fail: Callable[[str], ConfigError]) -> tuple[AssertionResult, RunUsage]:
    example, output = item.example, item.output
    if spec.type in JUDGE_TYPES:
        js = judge_spec(spec, settings.judge, fail)
        return await run_judge(js, caller, example, output.output, use_cache=item.use_cache,
                               assertion_type=spec.type, contexts=output.contexts)
    if spec.type == "composite":
        return await run_composite(spec, settings.judge, caller, example, output.output, fail,
                                   use_cache=item.use_cache)
    if spec.type == "trajectory_judge":
        js = judge_spec(spec, settings.judge, fail, TRAJECTORY_TEMPLATE_VERSION)
        return await run_trajectory_judge(js, caller, example, output.output, output.trace,
                                          use_cache=item.use_cache)
    return await check_similar(spec, settings.embedding, caller, example, output.output,
                               fail, use_cache=item.use_cache)


def _check_pure(spec: AssertionSpec, item: Item) -> AssertionResult:
    example, output = item.example, item.output
    if spec.type in agent.AGENT_TYPES:
        passed, message = agent.check(spec, output.trace)
        return AssertionResult(spec.type, passed, 1.0 if passed else 0.0,
                               "" if passed else message)
    if spec.type in RETRIEVAL_TYPES:
        return check_retrieval(spec, output.retrieved_ids, example)
    if spec.type in structured.STRUCTURED_TYPES:
        passed, message, details = structured.check(spec, output.output, example, output)
        return AssertionResult(spec.type, passed, 1.0 if passed else 0.0,
                               "" if passed else message, details=details)
    if spec.type in safety.SAFETY_TYPES:
        passed, message, details = safety.check_safety(spec, assertions.as_text(output.output))
        return AssertionResult(spec.type, passed, 1.0 if passed else 0.0,
                               "" if passed else message, details=details)
    return assertions.check(spec, output.output, example)


async def _fill_python(suite_specs: Sequence[AssertionSpec], items: Sequence[Item],
                       partial: list[_Partial], root: Path, settings: Settings) -> None:
    """Run each ``python`` assertion once over the items that carry it and fill its slots."""
    groups: dict[int, tuple[AssertionSpec, list[tuple[int, int]]]] = {}
    for i, item in enumerate(items):
        if item.output.error is not None:
            continue
        for j, spec in enumerate(specs_of(suite_specs, item.example)):
            if spec.type == "python":
                groups.setdefault(id(spec), (spec, []))[1].append((i, j))
    for spec, slots in groups.values():
        pairs = [(items[i].example, items[i].output.output) for i, _ in slots]
        results = await run_python(spec, pairs, root, settings)
        for (i, j), result in zip(slots, results, strict=True):
            partial[i][0][j] = result


def _finish(item: Item, results: list[AssertionResult | None], spend: RunUsage) -> ExampleResult:
    example, output = item.example, item.output
    checked, not_finite = _finite([r for r in results if r is not None])
    error = output.error if output.error is not None else not_finite
    errored = error is not None
    kind = output.error_kind if output.error is not None else "not_finite" if errored else None
    unscored = not not_finite and ((errored and kind in UNSCORED_KINDS) or any(
        r.errored for r in checked))
    return ExampleResult(
        id=example.id, line=example.line,
        passed=not errored and not unscored and all(r.passed for r in checked),
        errored=errored, output=None if output.error is not None else output.output,
        expected=example.expected, error=error, assertions=tuple(checked),
        latency_ms=output.latency_ms, cost_usd=output.cost_usd, tags=example.tags,
        metadata=example.metadata, repeat=item.repeat,
        error_kind=kind, unscored=unscored,
        usage=dict(output.usage), spend=output.spend + spend, cached=output.cached,
        label=_label(checked, example), contexts=output.contexts,
        retrieved_ids=output.retrieved_ids, input=example.input,
        id_from_line=example.id_from_line, error_field=output.error_field if errored else "",
        trace=output.trace, notes=output.notes)


def _finite(results: list[AssertionResult]) -> tuple[list[AssertionResult], str | None]:
    """Fail every assertion whose score is NaN or infinite; return the results and the
    example's error naming the first such value (None when every score is a number)."""
    bad = [r for r in results if not math.isfinite(r.score)]
    if not bad:
        return results, None
    reason = (f"assertion `{bad[0].type}` gave {bad[0].score!r}, not a finite number "
              "(counted as failed)")
    return [replace(r, passed=False, score=0.0, message=reason, errored=False)
            if not math.isfinite(r.score) else r for r in results], reason


def _label(results: list[AssertionResult], example: Example) -> str | None:
    """The ``classification`` assertion's label; the expected spelling when it matched."""
    for result in results:
        if result.type == "classification":
            if result.passed and example.expected is not None:
                return str(example.expected).strip()
            label = result.details.get("label")
            return None if label is None else str(label)
    return None
