"""Value types shared by the eval engine, the gate and the report.

Every type here is a frozen dataclass holding plain data: the engine produces them, the gate
compares them, the report renders them, and none of them does I/O. Scores and rates are
fractions in 0-1, times are milliseconds (``_ms``) or seconds (``_s``), money is USD
(``_usd``), and line numbers are 1-based, as GitHub's annotations want them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from worker.errors import ConfigError
from worker.evals.filenames import CONFIG_FILENAME as CONFIG_FILENAME
from worker.evals.llm_types import CacheMode as CacheMode
from worker.evals.llm_types import CostEstimate as CostEstimate
from worker.evals.llm_types import Endpoint as Endpoint
from worker.evals.llm_types import ErrorKind as ErrorKind
from worker.evals.llm_types import ModelTarget as ModelTarget
from worker.evals.llm_types import PairwiseResult as PairwiseResult
from worker.evals.llm_types import Pricing as Pricing
from worker.evals.llm_types import RetrySettings as RetrySettings
from worker.evals.llm_types import RunUsage as RunUsage
from worker.evals.llm_types import TokenUsage as TokenUsage
from worker.evals.llm_types import ToolCall as ToolCall
from worker.evals.llm_types import Trace as Trace
from worker.evals.llm_types import TrapSummary as TrapSummary


@dataclass(frozen=True)
class AssertionSpec:
    """One assertion as configured.

    Attributes:
        type: the assertion type (``equals``, ``contains``, ``regex`` ...).
        params: the remaining keys of the assertion mapping (``value``, ``values``,
            ``ignore_case``, ``pattern`` ...), as parsed from YAML or JSON.
        line: 1-based line of the assertion in its file (config or dataset), for error reports.
    """

    type: str
    params: dict[str, Any] = field(default_factory=dict)
    line: int | None = None


@dataclass(frozen=True)
class GateRule:
    """The gate rules configured for one metric of one suite.

    Attributes:
        metric: metric name, e.g. ``pass_rate`` or ``assertion.equals.pass_rate``.
        min: head's value must be at least this (fraction 0-1), or None.
        max_drop: head may fall at most this far below base (absolute, fraction 0-1), or None.
        line: 1-based line of the metric's key in the config file.
        regression_alpha: ``regression: {alpha}``: fail on a drop whose Holm-adjusted one-sided
            p-value is at most this (fraction 0-1), or None.
        non_inferiority_margin: pass only when the 95% CI of head - base lies above -margin
            (metric units), or None.
        max_new_failures: at most this many examples may pass at base and fail at head, or None.
        min_detectable: the drop (metric units) the set must be able to detect at 80% power,
            or None; ``min_detectable_action`` is ``fail`` or ``warn`` when it cannot.
        max: for lower-is-better metrics (latency, cost, tokens, error rates): head's value
            must be at most this (metric units), or None.
        max_increase: for lower-is-better metrics: head may rise at most this far above base
            (absolute, metric units), or None.
        primary: ``primary: true``: the metric's ``regression`` tests get most of the gate's
            alpha (``settings.statistics.primary_share``; worker/evals/verdict/signflip.py).
        max_increase_pct: for lower-is-better metrics: head may rise at most this many percent
            above base (100 * (head - base) / base), or None.
        max_example_drop: ``max_example_drop: {by}``: an example whose value falls by more than
            this (metric units, a rise for lower-is-better metrics) from base to head counts as
            dropped, or None; ``max_example_drops`` is the ``count`` of dropped examples allowed.
    """

    metric: str
    min: float | None = None
    max_drop: float | None = None
    line: int | None = None
    regression_alpha: float | None = None
    non_inferiority_margin: float | None = None
    max_new_failures: int | None = None
    min_detectable: float | None = None
    min_detectable_action: Literal["fail", "warn"] = "fail"
    max: float | None = None
    max_increase: float | None = None
    primary: bool = False
    max_increase_pct: float | None = None
    max_example_drop: float | None = None
    max_example_drops: int | None = None


@dataclass(frozen=True)
class GateOptions:
    """Suite-wide options of the ``gate:`` section (besides the per-metric rules).

    Attributes:
        critical_tags: examples carrying any of these tags must pass at head.
        group_by: metadata key whose value groups examples (rules also apply per group), or None.
        group_min_items: smallest group (paired examples) the rules are applied to.
        on_inconclusive: check conclusion when a rule is inconclusive: ``pass`` (success),
            ``neutral`` or ``fail`` (failure); ``undecided`` when not set: the run is
            undecided (``action_required``, or ``neutral`` under base's
            ``settings.undecided: neutral``; worker/evals/verdict/health.py).
        quarantine: example ids left out of per-example rules (still counted in means).
        line: 1-based line where the suite's ``gate:`` mapping starts.
        critical_max_failures: ``critical: {max_failures}``: how many critical examples may
            fail at head (0: every one must pass).
    """

    critical_tags: tuple[str, ...] = ()
    group_by: str | None = None
    group_min_items: int = 5
    on_inconclusive: Literal["pass", "neutral", "undecided", "fail"] = "undecided"
    quarantine: tuple[str, ...] = ()
    line: int | None = None
    critical_max_failures: int = 0


@dataclass(frozen=True)
class CommandTarget:
    """A target that runs a command once per example.

    Attributes:
        command: the command line, with ``{input_file}`` and ``{output_file}`` placeholders,
            split with shlex (never run through a shell).
        line: 1-based line of ``command`` in the config.
        batch: one invocation for all examples: ``{input_file}`` is JSONL of every input and
            ``{output_file}`` JSONL of every output (see worker/evals/run/batch.py).
    """

    command: str
    line: int | None = None
    batch: bool = False


@dataclass(frozen=True)
class StatisticsSettings:
    """How the ``regression`` tests of a gate are decided (``settings.statistics``, from base).

    Attributes:
        method: ``signflip`` (default: one weighted step-down min-P family over paired sign
            flips, worker/evals/verdict/signflip.py) or ``holm`` (Holm over each test's own
            p-value).
        primary_share: share (0-1) of alpha given to the tests of ``primary: true`` metrics
            when any metric is primary (default 0.8).
        group_share: share (0-1) of a metric's alpha given to its group tests, the rest to its
            whole-suite test (default 0.5; groups need ``groups: {by: ...}``).
        draws: random sign patterns (default 2000) when there are too many to enumerate.
        confirm_flips: extra provider calls, as a fraction (0-1) of one head run, spent on
            re-running discordant examples once more at base and at head (default 0: off;
            worker/pipeline/confirm.py).
        sequential: ``settings.sequential``: run head in `looks` batches and stop once the
            gate can only fail or is all but sure to pass (worker/pipeline/sequential.py).
        looks: batches of a sequential run (2-10, default 4).
        spending: alpha-spending function of a sequential run: ``haybittle_peto`` (default:
            a fifth of alpha over the interim looks, the rest kept for the last),
            ``obrien_fleming`` or ``pocock`` (Lan & DeMets 1983;
            worker/evals/verdict/sequential.py says why).
    """

    method: Literal["signflip", "holm"] = "signflip"
    primary_share: float = 0.8
    group_share: float = 0.5
    draws: int = 2000
    confirm_flips: float = 0.0
    sequential: bool = False
    looks: int = 4
    spending: Literal["haybittle_peto", "obrien_fleming", "pocock"] = "haybittle_peto"


@dataclass(frozen=True)
class Settings:
    """Run settings of the config's ``settings:`` section.

    Attributes:
        timeout_s: wall-clock limit of one target invocation, seconds (default 60).
        concurrency: how many target invocations run at once (default 4).
        env: names of environment variables the target may see (besides PATH, HOME, LANG).
        repeats: runs of each example (independent draws, cache bypassed), default 1.
        cache: whether model and judge answers are cached in Redis (default true).
        max_cost_usd: USD one run (one commit's suites) may spend, or None; a run estimated
            above it does not start, and a run reaching it sends no more calls ("over
            budget": ``action_required``).
        max_duration_s: seconds one run may take, or None; no call starts after it.
        retry: retries of provider calls.
        max_provider_error_rate: share (0-1) of a side's examples that may end without an
            answer for a cause outside the pull request (429, 5xx, timeouts on an endpoint
            base uses too) before the run is undecided (default 0.1;
            worker/evals/verdict/health.py).
        max_judge_error_rate: share (0-1) of examples whose judge may error before the check
            is not ``success`` (default 0.1).
        judge: the default judge model of ``llm_judge`` and ``pairwise``, or None.
        embedding: the default embedding model of ``similar``, or None.
        estimate_output_tokens: completion tokens assumed per call by the estimate when
            ``max_tokens`` is not set (default 256).
        base: which base commit a pull request is compared with: ``merge_base`` (default,
            what "Files changed" shows) or ``tip`` (the base branch's tip); read from the base
            side only (worker/gate/evaluate.py).
        on_paths_conclusion: the check's conclusion when no suite's ``on_paths`` matches a
            changed file: ``success`` (default) or ``skipped``; read from the base side only.
        drafts: whether a draft pull request is gated: ``run`` (default) or ``skip`` (its check
            is concluded ``skipped``); read from the base side only (worker/gate/drafts.py).
        checks: how a repository with several configs reports (root config only,
            worker/pipeline/plan.py): ``combined`` (default: one ``llmgate`` check run) or
            ``per_config`` (one check run per config besides the aggregate ``llmgate``).
        undecided: the conclusion of a run the gate could not decide for reasons outside
            the pull request (provider outage, base could not run, an inconclusive rule
            without ``on_inconclusive``): ``action_required`` (default: blocks, with Re-run
            and Let through) or ``neutral``; read from the base side only (health.py).
        statistics: how ``regression`` tests are decided (``settings.statistics`` and
            ``settings.sequential``); read from the base side only (worker/evals/verdict/rules.py).

    The fields that bound a run or decide its verdict
    (`worker.evals.config.base_settings.FROM_BASE`) apply to the head run as the base config sets
    them.
    """

    timeout_s: float = 60.0
    concurrency: int = 4
    env: tuple[str, ...] = ()
    repeats: int = 1
    cache: bool = True
    max_cost_usd: float | None = None
    max_duration_s: float | None = None
    retry: RetrySettings = field(default_factory=RetrySettings)
    max_provider_error_rate: float = 0.1
    max_judge_error_rate: float = 0.1
    judge: Endpoint | None = None
    embedding: Endpoint | None = None
    estimate_output_tokens: int = 256
    base: Literal["merge_base", "tip"] = "merge_base"
    on_paths_conclusion: Literal["success", "skipped"] = "success"
    drafts: Literal["run", "skip"] = "run"
    checks: Literal["combined", "per_config"] = "combined"
    undecided: Literal["action_required", "neutral"] = "action_required"
    statistics: StatisticsSettings = StatisticsSettings()


@dataclass(frozen=True)
class MetricSpec:
    """A custom metric of a suite (``metrics:``; worker/evals/score/custom_metrics.py).

    Attributes:
        name: the metric's name; gate rules name it ``custom.<name>``.
        function: ``path/to/file.py:fn`` in the repository (run confined), or None.
        entry_point: a name in the entry-point group ``llmgate.metrics``, or None.
        per_example: True: ``fn(result)`` gives one value per example and the metric is
            their mean (paired rules apply); False: ``fn(results)`` gives the suite's value.
        line: 1-based line of the metric in the config.
    """

    name: str
    function: str | None = None
    entry_point: str | None = None
    per_example: bool = False
    line: int | None = None


@dataclass(frozen=True)
class SuiteConfig:
    """One suite: a dataset, a target, assertions and gate rules.

    Attributes:
        name: unique suite name.
        dataset: path of the JSONL dataset relative to the repository root (POSIX).
        target: how outputs are produced: a command, or a model and a prompt.
        assertions: assertions applied to every example.
        gate: gate rules keyed by metric name.
        line: 1-based line where the suite starts in the config.
        gate_options: the suite-wide gate options (critical tags, groups, quarantine ...).
        traps: JSONL of trap cases (known-wrong outputs the judge must fail), or None.
        on_paths: globs of repository paths; when set (at base), a pull request changing no
            matching file skips the suite (worker/pipeline/on_paths.py). () runs it always.
        contract_root: the checkout its evaluation contract (dataset, assertion files,
            traps) is read from when that is not the checkout its target runs in: base's,
            when head's target is scored on base's contract (worker/evals/verdict/contract.py);
            None (a parsed config) for the run's own checkout. Not part of any key.
        consistency: how a ``type: consistency`` suite perturbs its multiple-choice
            questions (worker/evals/config/consistency.py); None for an ordinary suite.
        judge: the suite's ``judge:`` rules on its judge (labels, min agreement, max drift;
            worker/pipeline/judge_trust.py), or None.
        metrics: the suite's custom metrics (``metrics:``), in file order.
        smoke: run only the first this many examples (questions, for a consistency suite)
            of the dataset (``llmgate run --smoke N``); None for all. Part of the baseline
            key, so a smoke run never reuses or stores a full baseline.
        columns: a CSV dataset's ``columns:``: (example key, column name) pairs, e.g.
            ``(("input", "question"),)`` (worker/evals/config/dataset_formats.py); () for none.
    """

    name: str
    dataset: str
    target: CommandTarget | ModelTarget
    assertions: tuple[AssertionSpec, ...]
    gate: dict[str, GateRule]
    line: int | None = None
    gate_options: GateOptions = GateOptions()
    traps: str | None = None
    on_paths: tuple[str, ...] = ()
    contract_root: Path | None = None
    consistency: ConsistencySpec | None = None
    judge: JudgeRules | None = None
    metrics: tuple[MetricSpec, ...] = ()
    smoke: int | None = None
    columns: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PerturbationSpec:
    """One perturbation of a consistency suite: its registered name and variants per question."""

    name: str
    num_variants: int = 2


@dataclass(frozen=True)
class ConsistencySpec:
    """The perturbations and metric parameters of a ``type: consistency`` suite.

    Attributes:
        perturbations: the perturbations applied to every question, in order; each adds up
            to its ``num_variants`` variants after the original (variant 0).
        seed: the seed of every perturbation (the same seed gives the same variants).
        mca_threshold: c of the ``mca`` metric, MCA(c) (fraction 0-1; default 1.0, the
            strictest: every variant right).
        agreement: tau of the ``aga`` metric, AGA(tau) (fraction 0-1, default 1.0).
    """

    perturbations: tuple[PerturbationSpec, ...]
    seed: int = 0
    mca_threshold: float = 1.0
    agreement: float = 1.0


@dataclass(frozen=True)
class JudgeRules:
    """A suite's rules on its judge, read from base (worker/pipeline/judge_trust.py).

    Attributes:
        labels: the human labels file (JSONL, relative POSIX path; its snapshot sits beside).
        min_agreement: least agreement with the labels (fraction 0-1), or None.
        max_drift: largest drop in agreement from the snapshot (fraction 0-1), or None.
        line: 1-based line where the ``judge:`` rules start.
    """

    labels: str
    min_agreement: float | None = None
    max_drift: float | None = None
    line: int | None = None


@dataclass(frozen=True)
class Config:
    """A parsed ``.llmgate.yml``.

    Attributes:
        version: schema version, always 1 for now.
        suites: the suites in file order.
        settings: run settings shared by the suites.
        path: the config file relative to the repository root.
        configs: the root config's ``configs:`` list: more configs of the repository to gate
            (worker/pipeline/plan.py); () when absent.
        discover: the root config's ``discover: true``: gate every ``.llmgate.yml`` found in
            the repository's folders.
        layout_line: 1-based line of ``configs:`` or ``discover:``, None when neither is set.
    """

    version: int
    suites: tuple[SuiteConfig, ...]
    settings: Settings
    path: str = CONFIG_FILENAME
    configs: tuple[ConfigRef, ...] = ()
    discover: bool = False
    layout_line: int | None = None


@dataclass(frozen=True)
class ConfigRef:
    """One entry of the root config's ``configs:`` list.

    Attributes:
        path: the listed config file, a normalised POSIX path relative to the repository root
            ending in ``/.llmgate.yml`` (an entry naming a folder gets the file name added).
        line: 1-based line of the entry in the root config.
    """

    path: str
    line: int


@dataclass(frozen=True)
class Turn:
    """One user turn of a multi-turn example (a conversation; worker/evals/run/conversation.py).

    Attributes:
        input: what the user says at this turn (any JSON value, like `Example.input`).
        expected: this turn's ``expected`` value, or None.
        assertions: this turn's own assertions (its ``assert`` list), checked on this turn's
            answer in addition to the suite's and the example's.
    """

    input: Any
    expected: Any = None
    assertions: tuple[AssertionSpec, ...] = ()


@dataclass(frozen=True)
class Example:
    """One dataset example.

    Attributes:
        id: the example id (the ``id`` field, or the 1-based line number as a string).
        line: 1-based line of the example in the dataset file.
        input: the ``input`` value (any JSON value).
        expected: the ``expected`` value, or None.
        vars: the ``vars`` mapping (empty when absent).
        assertions: per-example assertions from the ``assert`` field, added to the suite's.
        tags: the ``tags`` list (e.g. ``must_pass`` for a critical example).
        metadata: the ``metadata`` mapping (e.g. ``{"category": "billing"}`` for groups).
        id_from_line: True when the line had no ``id`` and ``id`` is its line number (such ids
            shift when lines move, so rules that pair base and head by id refuse them).
        relevant_ids: the ``relevant_ids`` of a RAG example as document id -> gain (1.0 for
            each id of a list), scored by the retrieval assertions
            (worker/evals/score/retrieval.py); None when absent.
        turns: the turns of a multi-turn example (a conversation), in order; () for an
            example with one input. A multi-turn example's ``input`` is the list of its turns'
            inputs and its ``expected`` the list of their expected values.
    """

    id: str
    line: int
    input: Any
    expected: Any = None
    vars: dict[str, Any] = field(default_factory=dict)
    assertions: tuple[AssertionSpec, ...] = ()
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    id_from_line: bool = False
    relevant_ids: dict[str, float] | None = None
    turns: tuple[Turn, ...] = ()


@dataclass(frozen=True)
class TargetOutput:
    """What a target produced for one example.

    Attributes:
        output: the output value, or None when the invocation errored.
        error: why the invocation failed (crash, timeout, missing or invalid output), else None.
        latency_ms: wall-clock time of the invocation, milliseconds.
        usage: token counts as reported by the target (``{"input": n, "output": n}``, and
            ``cached_input`` for model targets), or {}.
        cost_usd: cost reported by the target in USD, or None.
        error_kind: what kind of failure ``error`` is (see `ErrorKind`), None when no error.
        spend: provider calls, cache hits, tokens and USD actually spent producing it.
        cached: True when the answer came from llmgate's response cache.
        contexts: retrieved passages a RAG target reports, or ().
        retrieved_ids: ids of the retrieved documents a RAG target reports, or ().
        error_field: for a model call no retry can fix, what to fix (`ProviderError.field`:
            ``api_key_env``, ``api_base``, ``model`` or ``request``); "" otherwise.
        trace: what an agent did (tool calls, steps, turns, tokens, cost), or None when the
            target reported no trace.
        turns: for a multi-turn example, each answered turn's output in order (a conversation
            stops at its first failed turn); () otherwise.
        notes: what was done to the output to make it reportable (invalid Unicode replaced by
            U+FFFD, worker/evals/serialize.py `replaced_note`), and what was done after the
            command target exited (processes it left running were ended,
            worker/security/process.py `Finished.note`), or ().
    """

    output: Any
    error: str | None = None
    latency_ms: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    error_kind: ErrorKind | None = None
    spend: RunUsage = field(default_factory=RunUsage)
    cached: bool = False
    contexts: tuple[Any, ...] = ()
    retrieved_ids: tuple[str, ...] = ()
    error_field: str = ""
    trace: Trace | None = None
    turns: tuple[TargetOutput, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class AssertionResult:
    """The outcome of one assertion on one example.

    Attributes:
        type: the assertion type.
        passed: whether the assertion holds.
        score: 1.0 when passed else 0.0 (graded assertions may give values in between).
        message: a short reason, shown when it failed.
        errored: True when the assertion could not be scored (a judge error: its call failed
            or its reply had no verdict); then passed is False and it is neither a pass nor a
            failure: the example is unscored.
        details: extra data for the report (judge votes and disagreement, prompt version,
            similarity, predicted label).
    """

    type: str
    passed: bool
    score: float
    message: str = ""
    errored: bool = False
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ExampleResult:
    """The outcome of one example in one run.

    Attributes:
        id, line: as in `Example`.
        passed: True when the target did not error and every assertion passed.
        errored: True when the target failed for this example (counted as failed).
        output: the target's output (None when errored).
        expected: the example's expected value.
        error: the target's error text when errored.
        assertions: the result of each assertion, in order.
        latency_ms, cost_usd: as in `TargetOutput` (a cached answer keeps the latency and
            cost measured when it was fetched).
        tags, metadata: as in `Example` (the gate's critical tags and groups read them).
        repeat: 0-based draw number with ``settings.repeats`` (results of one example share
            its id and differ in ``repeat``); 0 otherwise.
        error_kind: as in `TargetOutput`; ``budget`` when the call was not sent.
        unscored: True when the example is neither a pass nor a failure: a provider error
            (rate limited, 5xx, timeout), a call not sent (budget), or a judge error.
        usage: tokens of the target's answer (``input``, ``output``, ``cached_input``).
        spend: provider use of this example, target and judges (cache hits cost nothing).
        cached: True when the target's answer came from the response cache.
        label: the predicted class label (``classification`` assertion), or None.
        contexts, retrieved_ids: as in `TargetOutput`.
        input: the example's input (for pairwise judging and the report), or None.
        id_from_line: as in `Example`.
        error_field: as in `TargetOutput`.
        custom: per-example custom metric name -> this example's value
            (worker/evals/score/custom_metrics.py).
        trace: as in `TargetOutput`.
        notes: as in `TargetOutput` (reported with the example).
    """

    id: str
    line: int
    passed: bool
    errored: bool
    output: Any
    expected: Any
    error: str | None = None
    assertions: tuple[AssertionResult, ...] = ()
    latency_ms: float = 0.0
    cost_usd: float | None = None
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    repeat: int = 0
    error_kind: ErrorKind | None = None
    unscored: bool = False
    usage: dict[str, int] = field(default_factory=dict)
    spend: RunUsage = field(default_factory=RunUsage)
    cached: bool = False
    label: str | None = None
    contexts: tuple[Any, ...] = ()
    retrieved_ids: tuple[str, ...] = ()
    input: Any = None
    id_from_line: bool = False
    error_field: str = ""
    custom: dict[str, float] = field(default_factory=dict)
    trace: Trace | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class SuiteFingerprint:
    """What produced one suite result and what scored it (worker/evals/run/fingerprint.py).

    Each component is the SHA-256 hex digest (64 characters) of one input of the run.

    Attributes:
        outputs: component -> digest of what produces the outputs: ``target`` (command or
            model, params, version, repeats), ``target_files``, ``prompt``, ``dataset_inputs``.
        scoring: component -> digest of what scores them: ``assertions``,
            ``assertion_files``, ``judges``, ``judge_prompts``, ``expected``, ``traps``.
        digest: SHA-256 over every component of both maps.
    """

    outputs: dict[str, str]
    scoring: dict[str, str]
    digest: str


@dataclass(frozen=True)
class SuiteResult:
    """One suite run at one commit.

    Attributes:
        name: the suite name.
        dataset: the dataset path relative to the repository root.
        examples: one result per example, in dataset order (with repeats, each example's
            draws one after another).
        metrics: metric name -> value (fractions 0-1 for rates).
        spend: provider calls, cache hits, tokens and USD of the suite (targets and judges).
        pairwise: head-versus-base judgements (head runs with a ``pairwise`` assertion only).
        traps: the judge's record on the suite's trap cases, or None.
        judge_versions: the prompt versions of the suite's judges (a changed rubric shows).
        stopped: why the suite stopped sending calls (budget or time), or None.
        fingerprint: what produced and scored the result (worker/evals/run/fingerprint.py), or
            None when unknown (a result made before fingerprints existed).
    """

    name: str
    dataset: str
    examples: tuple[ExampleResult, ...]
    metrics: dict[str, float]
    spend: RunUsage = field(default_factory=RunUsage)
    pairwise: tuple[PairwiseResult, ...] = ()
    traps: TrapSummary | None = None
    judge_versions: tuple[str, ...] = ()
    stopped: str | None = None
    fingerprint: SuiteFingerprint | None = None


@dataclass(frozen=True)
class RunResult:
    """All suites of one config run at one commit.

    Attributes:
        sha: the commit the run used ("" for a working tree).
        suites: suite name -> result.
        spend: provider use of the whole run (the sum of the suites').
        estimate: what the run was expected to send before it started, or None.
        stopped: why the run stopped early or did not start (budget, time), or None.
    """

    sha: str
    suites: dict[str, SuiteResult]
    spend: RunUsage = field(default_factory=RunUsage)
    estimate: CostEstimate | None = None
    stopped: str | None = None


RuleStatus = Literal["pass", "fail", "regression", "inconclusive", "skipped"]
Conclusion = Literal["success", "failure", "neutral", "cancelled", "timed_out", "action_required",
                     "skipped"]


@dataclass(frozen=True)
class RuleOutcome:
    """One gate rule checked for one suite and metric.

    Attributes:
        suite, metric: what was compared.
        rule: the rule as text, e.g. ``min 0.80`` or ``max_drop 0.05``.
        base: base's metric value, or None (no base result).
        head: head's metric value, or None (metric unavailable).
        delta: head - base, or None.
        status: ``pass``, ``fail`` or ``skipped`` (a relative rule without a base) for the
            threshold rules ``min`` and ``max_drop``; ``pass``, ``regression``, ``inconclusive``
            or ``skipped`` for the statistical and per-example rules.
        reason: a short explanation for every status but pass.
        group: the group the rule was applied to (``category=billing``), "" for the whole suite.
        effect: for ``inconclusive``, what it does to the check: ``failure``, ``neutral``,
            ``undecided`` or ``none`` (from ``on_inconclusive``, or ``min_detectable``'s
            ``action``).
    """

    suite: str
    metric: str
    rule: str
    base: float | None
    head: float | None
    delta: float | None
    status: RuleStatus
    reason: str = ""
    group: str = ""
    effect: Literal["none", "neutral", "undecided", "failure"] = "none"


@dataclass(frozen=True)
class PairedComparison:
    """Base and head compared example by example for one suite, metric and group.

    Values are in the metric's units (fractions 0-1 for rates); ``delta`` and the interval are
    head - base. A "drop" is a change for the worse (a rise for a lower-is-better metric).

    Attributes:
        suite, metric: what was compared; group: "" for the whole suite, else ``key=value``.
        n: paired examples (present on both sides with a value of the metric).
        added, removed: examples only at head / only at base (left out of the tests).
        base, head: means over the paired examples; delta: head - base.
        ci_low, ci_high: 95% paired bootstrap interval of delta, or None (n < 2).
        test: ``mcnemar`` (pass/fail values), ``wilcoxon`` (scores) or ``none`` (n = 0).
        p_value: one-sided p-value of a drop; p_adjusted: Holm-adjusted over every
            ``regression`` test of the gate, or None when no such rule covers it.
        fixed, broken: McNemar's discordant pairs (fail->pass, pass->fail), else None.
        n_zero: pairs with no difference (dropped before ranking by the signed-rank test).
        mdd: smallest drop detectable at 80% power at ``mdd_alpha`` (``inf``: none is).
        mdd_alpha: the one-sided level the MDD uses (the Holm first-step level).
        repeats: most repeats of an example; noise_sd: pooled run-to-run SD, or None.
        p_family: the marginal one-sided sign-flip p-value of the (flakiness-weighted) test
            the family decided on, or None under Holm (worker/evals/verdict/signflip.py).
        adjustment: how ``p_adjusted`` was adjusted: ``Holm`` or ``sign-flip min-P``.
    """

    suite: str
    metric: str
    group: str
    n: int
    added: int
    removed: int
    base: float | None
    head: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    test: Literal["mcnemar", "wilcoxon", "none"]
    p_value: float | None
    p_adjusted: float | None
    fixed: int | None
    broken: int | None
    n_zero: int
    mdd: float
    mdd_alpha: float
    repeats: int = 1
    noise_sd: float | None = None
    p_family: float | None = None
    adjustment: str = "Holm"


@dataclass(frozen=True)
class Regression:
    """An example that passed at base and fails at head.

    Attributes:
        suite: the suite name.
        dataset: dataset path relative to the repository root (annotation path).
        line: the example's 1-based line in the head dataset (annotation line).
        example_id: the example id.
        expected: the expected value.
        base_output, head_output: the outputs at base and head.
        reason: why it fails at head (failed assertion messages or the target error).
    """

    suite: str
    dataset: str
    line: int
    example_id: str
    expected: Any
    base_output: Any
    head_output: Any
    reason: str


#: Who a run error is put down to (worker/evals/verdict/causes.py): ``head`` (the pull request's
#: config, prompt, target or endpoint), ``outside`` (the provider, the worker, the base) or
#: ``limit`` (base's ``max_cost_usd`` or ``max_duration`` reached).
ErrorCause = Literal["head", "outside", "limit"]


@dataclass(frozen=True)
class RunError:
    """The first model-call error of one kind in one suite at one side, and its cause (at
    base also the first target error: worker/evals/verdict/base_targets.py).

    Attributes:
        side: ``head`` or ``base``.
        suite: the suite name.
        kind: the examples' `ErrorKind` (``rate_limited``, ``provider``, ``timeout``,
            ``budget``; ``target`` at base).
        permanent: True when no retry can fix it (a refused request, a missing key, a
            refused ``api_base``).
        cause: who it is put down to (`ErrorCause`).
        count: examples of the suite at that side that ended with this kind of error.
        example_id: the first of them (dataset order).
        message: its error text (the provider's status and message), clipped.
        path, line: the config file and 1-based line that set what failed (the target's
            ``api_key_env``, ``api_base`` or ``model``), for an error caused by the head;
            line None otherwise.
        field: the endpoint field that line sets, or "".
    """

    side: Literal["head", "base"]
    suite: str
    kind: ErrorKind
    permanent: bool
    cause: ErrorCause
    count: int
    example_id: str
    message: str
    path: str = CONFIG_FILENAME
    line: int | None = None
    field: str = ""


@dataclass(frozen=True)
class SuiteComparability:
    """Whether base and head of one suite were scored alike (worker/evals/verdict/comparable.py).

    Attributes:
        suite: the suite name.
        status: ``same`` (the scoring fingerprints match), ``rescored`` (base's outputs were
            re-scored with head's assertions and judges) or ``not_comparable`` (scoring
            differs and base could not be re-scored: relative rules do not decide the suite).
        scoring_changes: fingerprint components of the scoring that differ (``judges``,
            ``judge_prompts`` ...); () when they match or base has no fingerprint.
        output_changes: components of what produces the outputs that differ (``prompt``,
            ``target``, ``dataset_inputs`` ...): what the pull request changed.
        reason: one sentence for the report ("" for ``same``).
        spend: provider calls, cache hits, tokens and USD of the re-scoring.
    """

    suite: str
    status: Literal["same", "rescored", "not_comparable"]
    scoring_changes: tuple[str, ...] = ()
    output_changes: tuple[str, ...] = ()
    reason: str = ""
    spend: RunUsage = field(default_factory=RunUsage)


@dataclass(frozen=True)
class ContractChange:
    """A suite whose evaluation contract head changes, and how head fares under its own.

    The gate scores head's target on base's contract (worker/evals/verdict/contract.py); head's own
    contract is shown for information and applies once the pull request is merged.

    Attributes:
        suite: the suite name.
        changes: the parts of the contract head changes (`worker.evals.verdict.contract.COMPONENTS`:
            ``dataset_inputs``, ``expected``, ``labels``, ``assertions``,
            ``assertion_files``, ``judges``, ``judge_prompts``, ``traps``).
        added, removed: example ids only in head's dataset / only in base's.
        conclusion: the conclusion head's own contract would give (base re-scored with it).
        headline: that verdict's headline, or "".
        metrics: head's metrics under its own contract (fractions 0-1 for rates).
        regressions: examples that pass at base and fail at head under head's contract.
    """

    suite: str
    changes: tuple[str, ...]
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    conclusion: Conclusion = "success"
    headline: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    regressions: int = 0


@dataclass(frozen=True)
class JudgeAgreement:
    """A changed judge's agreement with people on base's labelled set, as the gate measured it.

    One per suite and criterion whose judge head changes, where base's ``judge:`` rules ran
    head's judge on base's labels file (worker/pipeline/judge_trust.py, from
    `worker.evals.run.judge_calibration_types.CriterionCalibration`). Not rendered: the report shows
    the rules' outcomes and a note; the gate's history record keeps these figures
    (worker/baselines/gate_records.py `judge_records`).

    Attributes:
        suite: the suite (as in the report's outcomes); criterion: the judged criterion.
        model: head's judge model; labels: base's labels file, relative to the repository root.
        agreement: the fraction of labelled answers head's judge rated as people did, 0-1.
        reference: the agreement compared with (base's snapshot, else base's judge measured
            now), 0-1, or None (none known).
        kappa: Cohen's kappa of judge and people (Cohen 1960), -1 to 1, or None when undefined
            (one category only).
        n: labelled answers compared (without the judge's errors).
        judge_errors: labelled answers the judge could not rate.
    """

    suite: str
    criterion: str
    model: str
    labels: str
    agreement: float | None
    reference: float | None
    kappa: float | None
    n: int
    judge_errors: int = 0


@dataclass(frozen=True)
class GateReport:
    """The verdict of one comparison, everything the report renders.

    Attributes:
        conclusion: the check-run conclusion: ``success``, ``failure``, ``action_required``
            (undecided, over budget or over time) or ``neutral`` (see
            worker/evals/verdict/health.py).
        outcomes: every rule checked, in suite/metric order.
        regressions: examples that passed at base and fail at head.
        head: the head run; base: the base run or None.
        config_error: set when the head config or dataset is invalid (then conclusion is failure
            and outcomes is empty).
        notes: other lines for the report (e.g. "no config at base: relative rules skipped").
        comparisons: the paired statistics of every gated metric (and group) with a base.
        holm_tests: how many ``regression`` p-values the Holm adjustment covered.
        headline: why the conclusion is what it is when the rules did not decide it (budget
            exceeded, rate limited, judge errors), shown first in the check title; or "".
        base_source: which base was compared and where its results came from, one sentence
            (e.g. "compared with 1a2b3c4, the merge base (stored baseline from the push to
            main ...)"), also the last note; None when no base ran (worker/baselines/reuse.py).
        base_sha: the base commit compared (the merge base by default, worker/gate/evaluate.py);
            "" when the caller's base was used as given.
        comparability: per suite with a base, whether base and head were scored alike
            (worker/evals/verdict/comparable.py).
        errors: the first model-call error of each kind per suite and side, with its cause
            (worker/evals/verdict/causes.py).
        errored: examples of head that got no answer for a cause of the head (listed,
            annotated, never dropped); ``reason`` is the error text.
        contract: the suites whose evaluation contract head changes, with head's verdict
            under its own contract (worker/evals/verdict/contract.py); () when head changes none.
        judge_agreement: the agreement with people of each judge head changes, where base's
            ``judge:`` rules measured it (worker/pipeline/judge_trust.py); () otherwise. Kept
            for the gate's history record, not rendered in any report.
    """

    conclusion: Conclusion
    outcomes: tuple[RuleOutcome, ...]
    regressions: tuple[Regression, ...]
    head: RunResult | None
    base: RunResult | None
    config_error: ConfigError | None = None
    notes: tuple[str, ...] = ()
    comparisons: tuple[PairedComparison, ...] = ()
    holm_tests: int = 0
    headline: str = ""
    base_source: str | None = None
    base_sha: str = ""
    comparability: tuple[SuiteComparability, ...] = ()
    errors: tuple[RunError, ...] = ()
    errored: tuple[Regression, ...] = ()
    contract: tuple[ContractChange, ...] = ()
    judge_agreement: tuple[JudgeAgreement, ...] = ()
