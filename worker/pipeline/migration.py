"""``llmgate migrate``: move a suite to a new model and search a prompt that suits it.

Steps (all on one `RunState`, so one budget, ``--budget-usd``, bounds every call):

1. Split the suite's dataset (worker/pipeline/migrate_variants.py) and write the splits and the
   candidate prompts under ``.llmgate/migrate/<suite>/work/`` in the repository (the runs read
   datasets and prompts inside it).
2. Estimate every call before any is sent: the candidates on train (the rewrites counted at the
   current prompt's length, their text being unknown yet), the two best on validation, the
   holdout runs and the optimiser call. Over ``--budget-usd``:
   `worker.pipeline.migrate_plan.OverBudget`, nothing sent.
3. The current prompt on the new model on train; the optimiser model is shown the template and
   the train rows it fails and proposes rewrites; the few-shot variants and the rewrites run on
   train; the two with the best train pass rate run on validation; the best there is chosen
   (ties: the better train rate, then the earlier candidate, ``current`` first).
4. Holdout: the current model and prompt against the new model and the chosen prompt, paired by
   example, with the gate's statistics (worker/evals/verdict/stats.py): the exact McNemar test
   both ways and a seeded paired bootstrap 95% interval of the difference in pass rate.
5. The chosen prompt and a ``git apply``-able diff of the prompt file and of the config's model
   line are written to ``.llmgate/migrate/<suite>/`` (the suite's name made one safe path
   segment: `worker.pipeline.migrate_variants.folder_name`).

When the budget or time limit is reached, the migration stops where it is and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from worker.errors import ConfigError
from worker.evals.config import decode_utf8, read_repo_file
from worker.evals.context import EvalContext
from worker.evals.llm_types import CostEstimate, Endpoint, RunUsage
from worker.evals.run import RunState, run_suites
from worker.evals.types import Config, SuiteResult
from worker.evals.verdict import bootstrap_means, mcnemar_drop, mcnemar_p, percentile_interval
from worker.pipeline import migrate_variants as variants
from worker.pipeline.migrate_plan import (
    MAX_FILE_BYTES,
    VALIDATED,
    MigrationRequest,
    Plan,
    estimate,
    prepare,
)
from worker.pipeline.migrate_variants import Variant

#: The optimiser call's prompt version (part of its cache key).
_OPTIMISER_VERSION = "migrate-optimiser-1"


@dataclass(frozen=True)
class Candidate:
    """A prompt and its pass rates (fractions 0-1; None: not run on that split)."""

    name: str
    train: float | None = None
    validation: float | None = None


@dataclass(frozen=True)
class Holdout:
    """The holdout comparison: pass rates of current and migrated (fractions 0-1), examples
    paired, fixed / broken (new passes where current failed / the reverse), the exact
    one-sided McNemar p-values of a gain and of a drop, and the 95% bootstrap interval of
    migrated - current."""

    current: float
    migrated: float
    n: int
    fixed: int
    broken: int
    p_gain: float
    p_drop: float
    interval: tuple[float, float]


@dataclass(frozen=True)
class Migration:
    """The outcome (module doc); ``stopped`` says why it ended early (then nothing written)."""

    suite: str
    current_model: str
    new_model: str
    sizes: tuple[int, int, int]
    estimate: CostEstimate
    candidates: tuple[Candidate, ...] = ()
    chosen: str | None = None
    holdout: Holdout | None = None
    spend: RunUsage = field(default_factory=RunUsage)
    stopped: str | None = None
    notes: tuple[str, ...] = ()
    written: tuple[str, ...] = ()


async def migrate(root: Path, config: Config, request: MigrationRequest,
                  evals: EvalContext | None = None) -> Migration:
    """Run the migration of ``request.suite`` to ``request.to`` (module doc). Its budget is
    ``request.budget_usd`` or the config's ``settings.max_cost_usd``, the smaller when both are
    set; its time limit the config's ``max_duration``.

    Raises:
        ConfigError: no such suite, not a model target with a text prompt, a dataset that is not
            JSONL or too small, a model without a known price under a budget.
        OverBudget: the estimate exceeds ``request.budget_usd`` (no call was sent).
    """
    limits = [v for v in (request.budget_usd, config.settings.max_cost_usd) if v is not None]
    request = replace(request, budget_usd=min(limits) if limits else None)  # the stricter
    plan = prepare(root, config, request)
    settings = replace(config.settings, max_cost_usd=request.budget_usd, repeats=1)
    plan.config = replace(plan.config, settings=settings)
    state = RunState(settings, evals)
    fewshots = variants.few_shot(plan.prompt, plan.splits.train, request.seed)
    planned = await estimate(plan, state, fewshots, request)
    sizes = (len(plan.splits.train), len(plan.splits.validation), len(plan.splits.holdout))
    result = Migration(request.suite, plan.target.model, request.to, sizes, planned)
    scores: dict[str, Candidate] = {}
    current = Variant("current", plan.prompt)
    run = await _score(plan, state, current, "train", plan.new)
    if run is None:
        return _stopped(result, state, scores)
    scores["current"] = Candidate("current", _rate(run))
    rewrites, notes = await _rewrites(plan, state, request, run)
    found = {v.name: v for v in (current, *fewshots, *rewrites)}
    for variant in (*fewshots, *rewrites):
        run = await _score(plan, state, variant, "train", plan.new)
        if run is None:
            return _stopped(replace(result, notes=tuple(notes)), state, scores)
        scores[variant.name] = Candidate(variant.name, _rate(run))
    best = await _validate(plan, state, found, scores)
    if best is None:
        return _stopped(replace(result, notes=tuple(notes)), state, scores)
    holdout = await _holdout(plan, state, found[best], request.seed)
    if holdout is None:
        return _stopped(replace(result, notes=tuple(notes)), state, scores)
    written = _write_outputs(plan, found[best].text, request.to)
    return replace(result, candidates=tuple(scores.values()), chosen=best, holdout=holdout,
                   spend=state.caller.total, notes=tuple(notes), written=written)

async def _score(plan: Plan, state: RunState, variant: Variant, split: str,
                 endpoint: Endpoint) -> SuiteResult | None:
    """Run one prompt on one split; None when the budget or time limit stopped it."""
    slug = variant.name.replace(" ", "-")
    rel = plan.write(f"{slug}.txt", variant.text)
    name = f"{plan.suite.name}:{slug}:{split}"
    (run,) = await run_suites([plan.suite_for(name, split, rel, endpoint)], plan.root,
                              ctx=state.ctx, with_base=False, state=state)
    suite = run.suites.get(name)
    return None if suite is None or state.budget.stopped else suite


async def _rewrites(plan: Plan, state: RunState, request: MigrationRequest,
                    current: SuiteResult) -> tuple[list[Variant], list[str]]:
    failed_ids = {e.id for e in current.examples if not e.passed}
    failures = [r for r in plan.splits.train if str(r.get("id")) in failed_ids]
    messages = variants.optimiser_messages(plan.prompt, failures, request.rewrites)
    outcome = await state.caller.chat(plan.optimiser, messages, version=_OPTIMISER_VERSION)
    if outcome.answer is None:
        return [], [f"the optimiser {plan.optimiser.model} proposed nothing: {outcome.error}"]
    found, dropped = variants.parse_rewrites(outcome.answer.text, plan.prompt, request.rewrites)
    notes = [f"{dropped} rewrite(s) of the optimiser dropped: they lost a template variable"
             ] if dropped else []
    return found, notes


async def _validate(plan: Plan, state: RunState, found: dict[str, Variant],
                    scores: dict[str, Candidate]) -> str | None:
    order = list(scores)
    ranked = sorted(order, key=lambda n: (-(scores[n].train or 0.0), order.index(n)))
    for name in ranked[:VALIDATED]:
        run = await _score(plan, state, found[name], "validation", plan.new)
        if run is None:
            return None
        scores[name] = replace(scores[name], validation=_rate(run))
    return min(ranked[:VALIDATED], key=lambda n: (-(scores[n].validation or 0.0),
                                                  -(scores[n].train or 0.0), order.index(n)))


async def _holdout(plan: Plan, state: RunState, best: Variant, seed: int) -> Holdout | None:
    current = await _score(plan, state, Variant("current-model", plan.prompt), "holdout",
                           plan.target.endpoint)
    migrated = await _score(plan, state, best, "holdout", plan.new) if current else None
    if current is None or migrated is None:
        return None
    before = {e.id: e.passed for e in current.examples}
    pairs = [(before[e.id], e.passed) for e in migrated.examples if e.id in before]
    base = np.array([p[0] for p in pairs], dtype=bool)
    head = np.array([p[1] for p in pairs], dtype=bool)
    drop = mcnemar_drop(base, head)
    differences = (head.astype(float) - base.astype(float)).reshape(-1, 1)
    means, _ = bootstrap_means(differences, np.zeros(len(pairs), dtype=np.intp),
                                     seed=seed)
    low, high = percentile_interval(means)[0]
    return Holdout(float(base.mean()), float(head.mean()), len(pairs), drop.fixed, drop.broken,
                   mcnemar_p(drop.fixed, drop.broken), drop.p_value,
                   (float(low), float(high)))


def _rate(suite: SuiteResult) -> float:
    """The suite's pass rate (fraction 0-1) over its examples."""
    examples = suite.examples
    return sum(e.passed for e in examples) / len(examples) if examples else 0.0


def _stopped(result: Migration, state: RunState, scores: dict[str, Candidate]) -> Migration:
    return replace(result, candidates=tuple(scores.values()), spend=state.caller.total,
                   stopped=state.budget.stopped or "a run of the migration did not finish")


def _write_outputs(plan: Plan, text: str, model: str) -> tuple[str, ...]:
    """Write the chosen prompt and the diff under ``.llmgate/migrate/<suite>/``."""
    out = plan.work.rsplit("/", 1)[0]
    prompt_name = plan.target.prompt.rsplit("/", 1)[-1]
    config_text = decode_utf8(read_repo_file(plan.root, plan.config.path, MAX_FILE_BYTES),
                              plan.config.path)
    line = plan.target.lines.get("model", plan.target.line or 0)
    try:
        changed = variants.with_model(config_text, line, plan.target.model, model)
    except ValueError as err:
        raise ConfigError(plan.config.path, line, str(err)) from None
    diff = variants.unified(plan.target.prompt, plan.prompt, text) + variants.unified(
        plan.config.path, config_text, changed)
    (plan.root / out / prompt_name).write_text(text, encoding="utf-8")
    (plan.root / out / "migration.diff").write_text(diff, encoding="utf-8")
    return f"{out}/{prompt_name}", f"{out}/migration.diff"
