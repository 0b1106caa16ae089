"""Value types shared by the eval engine, the gate and the report.

Every type here is a frozen dataclass holding plain data: the engine produces them, the gate
compares them, the report renders them, and none of them does I/O. Scores and rates are
fractions in 0-1, times are milliseconds (``_ms``) or seconds (``_s``), money is USD
(``_usd``), and line numbers are 1-based, as GitHub's annotations want them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

#: File name of the configuration at the repository root.
CONFIG_FILENAME = ".llmgate.yml"


class ConfigError(Exception):
    """A configuration or dataset problem that a user must fix in a file of the repository.

    Attributes:
        path: the file, relative to the repository root (POSIX separators).
        line: the 1-based line of the problem, or None when no line applies (a missing file).
        message: what is wrong and how to fix it, one sentence or two.
    """

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        self.message = message
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")


class ExecutionError(Exception):
    """The run itself could not happen (git failed, a checkout vanished); not the user's config."""


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
    """

    metric: str
    min: float | None = None
    max_drop: float | None = None
    line: int | None = None


@dataclass(frozen=True)
class CommandTarget:
    """A target that runs a command once per example.

    Attributes:
        command: the command line, with ``{input_file}`` and ``{output_file}`` placeholders,
            split with shlex (never run through a shell).
        line: 1-based line of ``command`` in the config.
    """

    command: str
    line: int | None = None


@dataclass(frozen=True)
class Settings:
    """Run settings of the config's ``settings:`` section.

    Attributes:
        timeout_s: wall-clock limit of one target invocation, seconds (default 60).
        concurrency: how many target invocations run at once (default 4).
        env: names of environment variables the target may see (besides PATH, HOME, LANG).
    """

    timeout_s: float = 60.0
    concurrency: int = 4
    env: tuple[str, ...] = ()


@dataclass(frozen=True)
class SuiteConfig:
    """One suite: a dataset, a target, assertions and gate rules.

    Attributes:
        name: unique suite name.
        dataset: path of the JSONL dataset relative to the repository root (POSIX).
        target: how outputs are produced.
        assertions: assertions applied to every example.
        gate: gate rules keyed by metric name.
        line: 1-based line where the suite starts in the config.
    """

    name: str
    dataset: str
    target: CommandTarget
    assertions: tuple[AssertionSpec, ...]
    gate: dict[str, GateRule]
    line: int | None = None


@dataclass(frozen=True)
class Config:
    """A parsed ``.llmgate.yml``.

    Attributes:
        version: schema version, always 1 for now.
        suites: the suites in file order.
        settings: run settings shared by the suites.
        path: the config file relative to the repository root.
    """

    version: int
    suites: tuple[SuiteConfig, ...]
    settings: Settings
    path: str = CONFIG_FILENAME


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
    """

    id: str
    line: int
    input: Any
    expected: Any = None
    vars: dict[str, Any] = field(default_factory=dict)
    assertions: tuple[AssertionSpec, ...] = ()


@dataclass(frozen=True)
class TargetOutput:
    """What a target produced for one example.

    Attributes:
        output: the output value, or None when the invocation errored.
        error: why the invocation failed (crash, timeout, missing or invalid output), else None.
        latency_ms: wall-clock time of the invocation, milliseconds.
        usage: token counts as reported by the target (``{"input": n, "output": n}``), or {}.
        cost_usd: cost reported by the target in USD, or None.
    """

    output: Any
    error: str | None = None
    latency_ms: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None


@dataclass(frozen=True)
class AssertionResult:
    """The outcome of one assertion on one example.

    Attributes:
        type: the assertion type.
        passed: whether the assertion holds.
        score: 1.0 when passed else 0.0 (graded assertions may give values in between).
        message: a short reason, shown when it failed.
    """

    type: str
    passed: bool
    score: float
    message: str = ""


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
        latency_ms, cost_usd: as in `TargetOutput`.
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


@dataclass(frozen=True)
class SuiteResult:
    """One suite run at one commit.

    Attributes:
        name: the suite name.
        dataset: the dataset path relative to the repository root.
        examples: one result per example, in dataset order.
        metrics: metric name -> value (fractions 0-1 for rates).
    """

    name: str
    dataset: str
    examples: tuple[ExampleResult, ...]
    metrics: dict[str, float]


@dataclass(frozen=True)
class RunResult:
    """All suites of one config run at one commit.

    Attributes:
        sha: the commit the run used ("" for a working tree).
        suites: suite name -> result.
    """

    sha: str
    suites: dict[str, SuiteResult]


RuleStatus = Literal["pass", "fail", "skipped"]
Conclusion = Literal["success", "failure", "neutral", "cancelled", "timed_out", "action_required"]


@dataclass(frozen=True)
class RuleOutcome:
    """One gate rule checked for one suite and metric.

    Attributes:
        suite, metric: what was compared.
        rule: the rule as text, e.g. ``min 0.80`` or ``max_drop 0.05``.
        base: base's metric value, or None (no base result).
        head: head's metric value, or None (metric unavailable).
        delta: head - base, or None.
        status: ``pass``, ``fail`` or ``skipped`` (a relative rule without a base).
        reason: a short explanation for fail and skipped.
    """

    suite: str
    metric: str
    rule: str
    base: float | None
    head: float | None
    delta: float | None
    status: RuleStatus
    reason: str = ""


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


@dataclass(frozen=True)
class GateReport:
    """The verdict of one comparison, everything the report renders.

    Attributes:
        conclusion: ``success`` or ``failure`` (check-run conclusion).
        outcomes: every rule checked, in suite/metric order.
        regressions: examples that passed at base and fail at head.
        head: the head run; base: the base run or None.
        config_error: set when the head config or dataset is invalid (then conclusion is failure
            and outcomes is empty).
        notes: other lines for the report (e.g. "no config at base: relative rules skipped").
    """

    conclusion: Conclusion
    outcomes: tuple[RuleOutcome, ...]
    regressions: tuple[Regression, ...]
    head: RunResult | None
    base: RunResult | None
    config_error: ConfigError | None = None
    notes: tuple[str, ...] = ()
