"""The plan and the estimate of ``llmgate migrate`` (worker/pipeline/migration.py runs them).

`prepare` checks the suite, splits its dataset and writes the splits under the work folder;
`estimate` counts every call of the migration before any is sent and refuses it over
``--budget-usd`` (worker/pipeline/migration.py, step 2).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from worker.errors import ConfigError
from worker.evals.config import decode_utf8, read_repo_file, split_lines
from worker.evals.llm import call_cost_usd, count_tokens
from worker.evals.llm_types import CostEstimate, Endpoint, ModelTarget, Pricing, TokenUsage
from worker.evals.run import RunState, estimate_configs, unpriced_error
from worker.evals.types import Config, SuiteConfig
from worker.pipeline import migrate_variants as variants
from worker.pipeline.migrate_variants import Splits, Variant
from worker.pipeline.overrides import suite_named

#: Largest dataset or prompt file read, bytes.
MAX_FILE_BYTES = 16 << 20
#: Candidates of the train split tried on validation.
VALIDATED = 2
#: Text prompt files a migration rewrites (chat message files are not rewritten).
TEXT_PROMPTS = (".txt", ".j2", ".jinja", ".md")


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


@dataclass
class Plan:
    """A migration under way: the checkout, the config (its settings under the budget), the
    suite, its target, the new and optimiser endpoints, the prompt text, the splits, and the
    work folder (relative POSIX)."""

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


def prepare(root: Path, config: Config, request: MigrationRequest) -> Plan:
    """Check the suite, split its dataset and write the splits (module doc).

    Raises:
        ConfigError: no such suite, not a model target with a text prompt, a dataset that is
            not JSONL, invalid or too small.
    """
    suite = suite_named(config, request.suite)
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
    plan = Plan(root, config, suite, target, new, optimiser, prompt, splits, work)
    for split in ("train", "validation", "holdout"):
        plan.write(f"{split}.jsonl", "".join(json.dumps(r) + "\n"
                                             for r in getattr(splits, split)))
    return plan


def _rows(root: Path, dataset: str) -> list[dict[str, Any]]:
    text = decode_utf8(read_repo_file(root, dataset, MAX_FILE_BYTES), dataset)
    rows = []
    for number, line in enumerate(split_lines(text), 1):  # a JSON string may hold U+2028
        if line.strip():
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise ConfigError(dataset, number, f"invalid JSON: {exc}") from None
            if not isinstance(row, dict):
                raise ConfigError(dataset, number, "each line must be a JSON object")
            rows.append(row)
    return rows


async def estimate(plan: Plan, state: RunState, fewshots: list[Variant],
                    request: MigrationRequest) -> CostEstimate:
    """Estimate every call of the migration and start the budget's clock.

    Raises:
        ConfigError: a model without a known price under a budget.
        OverBudget: the estimate exceeds ``request.budget_usd``.
    """
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
    state.ctx.observers.say(
        f"migrate estimate: {total.calls} provider calls, ~{total.tokens_in} tokens in, "
        f"~{total.tokens_out} out, "
        + ("unknown cost" if total.cost_usd is None else f"${total.cost_usd:.4f}"))
    limit = request.budget_usd
    if limit is not None and total.cost_usd is not None and total.cost_usd > limit:
        raise OverBudget(f"the estimate ${total.cost_usd:.4f} ({total.calls} calls) exceeds "
                         f"the budget ${limit:.4f} (--budget-usd or max_cost_usd): nothing "
                         "was sent")
    state.budget.start()
    return total


def _optimiser_estimate(plan: Plan, state: RunState,
                        request: MigrationRequest) -> CostEstimate:
    messages = variants.optimiser_messages(plan.prompt, plan.splits.train, request.rewrites)
    tokens_in = count_tokens(plan.optimiser.model, messages)
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
