"""``llmgate migrate``: move a suite to a new model and search a prompt that suits it.

Steps (all on one `RunState`, so one budget, ``--budget-usd``, bounds every call):

1. Split the suite's dataset (worker/pipeline/migrate_variants.py) and write the splits and the
   candidate prompts under ``.llmgate/migrate/<suite>/work/`` in the repository (the runs read
   datasets and prompts inside it).
2. Estimate every call before any is sent: the candidates on train (the rewrites counted at the
   current prompt's length, their text being unknown yet), the two best on validation, the
   holdout runs and the optimiser call. Over ``--budget-usd``: `OverBudget`, nothing sent.
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

import json
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from worker.errors import ConfigError
from worker.evals.config.files import decode_utf8, read_repo_file
from worker.evals.context import EvalContext
from worker.evals.llm import client as llm
from worker.evals.llm.cost import call_cost_usd
from worker.evals.llm_types import (
    CostEstimate,
    Endpoint,
    ModelTarget,
    Pricing,
    RunUsage,
    TokenUsage,
)
from worker.evals.run.estimate import estimate_configs
from worker.evals.run.runner import RunState, run_suites, unpriced_error
from worker.evals.types import Config, SuiteConfig, SuiteResult
from worker.evals.verdict import stats
from worker.pipeline import migrate_variants as variants
from worker.pipeline.migrate_variants import Splits, Variant

#: Largest dataset or prompt file read, bytes.
MAX_FILE_BYTES = 16 << 20
#: Candidates of the train split tried on validation.
VALIDATED = 2
#: Text prompt files a migration rewrites (chat message files are not rewritten).
TEXT_PROMPTS = (".txt", ".j2", ".jinja", ".md")
_OPTIMISER_VERSION = "migrate-optimiser-1"


class OverBudget(Exception):
    """The migration's estimate is over ``--budget-usd``: nothing was sent."""


@dataclass(frozen=True)
class MigrationRequest:
    """What to migrate: suite; to: the new litellm model; budget_usd: USD or None; seed;
    optimiser: the optimiser model (None: the new model); rewrites: how many to ask for;
    pricing: the new model's and optimiser's prices when litellm has none, or None."""

    suite: str
    to: str
    budget_usd: float | None = None
    seed: int = 0
    optimiser: str | None = None
    rewrites: int = 3
    pricing: Pricing | None = None


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


@dataclass
class _Plan:
    root: Path
    config: Config
    suite: SuiteConfig
    target: ModelTarget
    new: Endpoint
    optimiser: Endpoint
    prompt: str
    splits: Splits
    work: str  # the work folder, relative POSIX

    def write(self, name: str, text: str) -> str:
        rel = f"{self.work}/{name}"
        (self.root / rel).write_text(text, encoding="utf-8")
        return rel

    def suite_for(self, name: str, split: str, prompt_rel: str, endpoint: Endpoint) -> Config:
        target = replace(self.target, endpoint=endpoint, prompt=prompt_rel)
        suite = replace(self.suite, name=name, dataset=f"{self.work}/{split}.jsonl",
                        target=target, traps=None, judge=None, contract_root=None)
        return replace(self.config, suites=(suite,))


async def migrate(root: Path, config: Config, request: MigrationRequest,
                  evals: EvalContext | None = None) -> Migration:
    """Run the migration of ``request.suite`` to ``request.to`` (module doc).

    Raises:
        ConfigError: no such suite, not a model target with a text prompt, a dataset that is not
            JSONL or too small, a model without a known price under a budget.
        OverBudget: the estimate exceeds ``request.budget_usd`` (no call was sent).
    """
    plan = _prepare(root, config, request)
    settings = replace(config.settings, max_cost_usd=request.budget_usd, repeats=1)
    plan.config = replace(plan.config, settings=settings)
    state = RunState(settings, evals)
    fewshots = variants.few_shot(plan.prompt, plan.splits.train, request.seed)
    estimate = await _estimate(plan, state, fewshots, request)
    sizes = (len(plan.splits.train), len(plan.splits.validation), len(plan.splits.holdout))
    result = Migration(request.suite, plan.target.model, request.to, sizes, estimate)
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


def _prepare(root: Path, config: Config, request: MigrationRequest) -> _Plan:
    suites = {s.name: s for s in config.suites}
    if request.suite not in suites:
        raise ConfigError(config.path, None, f"no suite {request.suite!r} (suites: "
                          f"{', '.join(suites) or 'none'})")
    suite = suites[request.suite]
    target = suite.target
    if not isinstance(target, ModelTarget):
        raise ConfigError(config.path, suite.line, f"suite {suite.name!r} runs a command: "
                          "only a model target (`target: {model: ...}`) can be migrated")
    if not target.prompt.endswith(TEXT_PROMPTS):
        raise ConfigError(config.path, target.line, f"the prompt {target.prompt} is not a text "
                          f"template ({', '.join(TEXT_PROMPTS)}): migrate rewrites text prompts")
    if not suite.dataset.endswith(".jsonl"):
        raise ConfigError(config.path, suite.line, "migrate splits JSONL datasets only")
    prompt = decode_utf8(read_repo_file(root, target.prompt, MAX_FILE_BYTES), target.prompt)
    rows = _rows(root, suite.dataset)
    try:
        splits = variants.split_rows(rows, request.seed)
    except ValueError as err:
        raise ConfigError(suite.dataset, None, str(err)) from None
    new = replace(target.endpoint, model=request.to, pricing=request.pricing)
    optimiser = replace(new, model=request.optimiser) if request.optimiser else new
    work = f".llmgate/migrate/{variants.folder_name(suite.name)}/work"  # ours to replace
    shutil.rmtree(root / work, ignore_errors=True)
    (root / work).mkdir(parents=True)
    plan = _Plan(root, config, suite, target, new, optimiser, prompt, splits, work)
    for split in ("train", "validation", "holdout"):
        plan.write(f"{split}.jsonl", "".join(json.dumps(r) + "\n"
                                             for r in getattr(splits, split)))
    return plan


def _rows(root: Path, dataset: str) -> list[dict[str, Any]]:
    text = decode_utf8(read_repo_file(root, dataset, MAX_FILE_BYTES), dataset)
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise ConfigError(dataset, number, f"invalid JSON: {exc}") from None
            if not isinstance(row, dict):
                raise ConfigError(dataset, number, "each line must be a JSON object")
            rows.append(row)
    return rows


async def _estimate(plan: _Plan, state: RunState, fewshots: list[Variant],
                    request: MigrationRequest) -> CostEstimate:
    """Estimate every call of the migration (module doc, step 2); raise when over budget."""
    known = [Variant("current", plan.prompt), *fewshots]
    parts: list[CostEstimate] = []

    async def one(name: str, split: str, variant: Variant, endpoint: Endpoint) -> CostEstimate:
        rel = plan.write(f"estimate-{len(parts)}.txt", variant.text)
        planned = await estimate_configs([plan.suite_for(name, split, rel, endpoint)],
                                         plan.root, state.caller, with_base=False)
        if planned.unpriced and request.budget_usd is not None:
            raise unpriced_error(planned.unpriced[0], request.budget_usd)
        return planned.cost

    for variant in known:
        parts.append(await one(variant.name, "train", variant, plan.new))
    rewrite = await one("rewrite", "train", known[0], plan.new)
    parts += [rewrite] * request.rewrites
    widest = max(known, key=lambda v: len(v.text))
    parts += [await one("validation", "validation", widest, plan.new)] * VALIDATED
    parts.append(await one("holdout", "holdout", widest, plan.new))
    parts.append(await one("holdout-current", "holdout", known[0], plan.target.endpoint))
    parts.append(_optimiser_estimate(plan, state, request))
    total = _sum(parts)
    state.ctx.say(f"migrate estimate: {total.calls} provider calls, ~{total.tokens_in} tokens "
                  f"in, ~{total.tokens_out} out, "
                  + ("unknown cost" if total.cost_usd is None else f"${total.cost_usd:.4f}"))
    limit = request.budget_usd
    if limit is not None and total.cost_usd is not None and total.cost_usd > limit:
        raise OverBudget(f"the estimate ${total.cost_usd:.4f} ({total.calls} calls) exceeds "
                         f"--budget-usd ${limit:.4f}: nothing was sent")
    state.budget.start()
    return total


def _optimiser_estimate(plan: _Plan, state: RunState,
                        request: MigrationRequest) -> CostEstimate:
    messages = variants.optimiser_messages(plan.prompt, plan.splits.train, request.rewrites)
    tokens_in = llm.count_tokens(plan.optimiser.model, messages)
    tokens_out = plan.config.settings.estimate_output_tokens * max(1, request.rewrites)
    prices = state.caller.prices(plan.optimiser)
    if prices is None and request.budget_usd is not None:
        raise ConfigError(plan.config.path, plan.target.line, f"the optimiser model "
                          f"{plan.optimiser.model} has no known price: give --pricing")
    cost = None if prices is None else call_cost_usd(TokenUsage(tokens_in, tokens_out), prices)
    return CostEstimate(1, tokens_in, tokens_out, cost, 0)


def _sum(parts: list[CostEstimate]) -> CostEstimate:
    costs = [p.cost_usd for p in parts]
    cost = None if any(c is None for c in costs) else round(sum(c or 0.0 for c in costs), 6)
    return CostEstimate(sum(p.calls for p in parts), sum(p.tokens_in for p in parts),
                        sum(p.tokens_out for p in parts), cost,
                        sum(p.cached_calls for p in parts))


async def _score(plan: _Plan, state: RunState, variant: Variant, split: str,
                 endpoint: Endpoint) -> SuiteResult | None:
    """Run one prompt on one split; None when the budget or time limit stopped it."""
    slug = variant.name.replace(" ", "-")
    rel = plan.write(f"{slug}.txt", variant.text)
    name = f"{plan.suite.name}:{slug}:{split}"
    (run,) = await run_suites([plan.suite_for(name, split, rel, endpoint)], plan.root,
                              ctx=state.ctx, with_base=False, state=state)
    suite = run.suites.get(name)
    return None if suite is None or state.budget.stopped else suite


async def _rewrites(plan: _Plan, state: RunState, request: MigrationRequest,
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


async def _validate(plan: _Plan, state: RunState, found: dict[str, Variant],
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


async def _holdout(plan: _Plan, state: RunState, best: Variant, seed: int) -> Holdout | None:
    current = await _score(plan, state, Variant("current-model", plan.prompt), "holdout",
                           plan.target.endpoint)
    migrated = await _score(plan, state, best, "holdout", plan.new) if current else None
    if current is None or migrated is None:
        return None
    before = {e.id: e.passed for e in current.examples}
    pairs = [(before[e.id], e.passed) for e in migrated.examples if e.id in before]
    base = np.array([p[0] for p in pairs], dtype=bool)
    head = np.array([p[1] for p in pairs], dtype=bool)
    drop = stats.mcnemar_drop(base, head)
    differences = (head.astype(float) - base.astype(float)).reshape(-1, 1)
    means, _ = stats.bootstrap_means(differences, np.zeros(len(pairs), dtype=np.intp),
                                     seed=seed)
    low, high = stats.percentile_interval(means)[0]
    return Holdout(float(base.mean()), float(head.mean()), len(pairs), drop.fixed, drop.broken,
                   stats.mcnemar_p(drop.fixed, drop.broken), drop.p_value,
                   (float(low), float(high)))


def _rate(suite: SuiteResult) -> float:
    """The suite's pass rate (fraction 0-1) over its examples."""
    examples = suite.examples
    return sum(e.passed for e in examples) / len(examples) if examples else 0.0


def _stopped(result: Migration, state: RunState, scores: dict[str, Candidate]) -> Migration:
    return replace(result, candidates=tuple(scores.values()), spend=state.caller.total,
                   stopped=state.budget.stopped or "a run of the migration did not finish")


def _write_outputs(plan: _Plan, text: str, model: str) -> tuple[str, ...]:
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
