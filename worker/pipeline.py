"""Gate two checked-out trees: the one function both the worker and ``llmgate run`` call.

It reads ``.llmgate.yml`` at head (and at base), runs every suite on each tree, and compares the
runs. Configuration problems become a `GateReport` with ``config_error`` set (a failed check with
an annotation), never an exception; only failures of the run itself raise.
"""

from __future__ import annotations

from pathlib import Path

from worker.evals.config import load_config, parse_config
from worker.evals.context import EvalContext
from worker.evals.engine import run_config
from worker.evals.gate import compare, config_error_report
from worker.evals.health import finish_report
from worker.evals.rules import merge_rules
from worker.evals.runner import judge_pairs
from worker.evals.types import CONFIG_FILENAME, Config, ConfigError, GateReport, RunResult


def read_config(root: Path, config_path: str = CONFIG_FILENAME) -> Config | None:
    """Parse the config at ``root/config_path``; None when the file does not exist.

    Raises:
        ConfigError: the file is invalid (with its line), or escapes ``root``.
    """
    if config_path == CONFIG_FILENAME:
        return load_config(root)
    path = (root / config_path).resolve()
    if not path.is_relative_to(root.resolve()):
        raise ConfigError(config_path, None, "the config path must stay inside the repository")
    if not path.is_file():
        return None
    return parse_config(path.read_text(encoding="utf-8"), config_path)


async def gate_trees(
    head_root: Path,
    base_root: Path | None,
    *,
    head_sha: str = "",
    base_sha: str = "",
    config_path: str = CONFIG_FILENAME,
    evals: EvalContext | None = None,
) -> GateReport:
    """Run the suites at head (and base, when given) and compare them.

    Args:
        head_root: checkout of the head commit (or a working tree).
        base_root: checkout of the base commit, or None to apply only the absolute rules.
        head_sha, base_sha: commit SHAs recorded in the runs ("" for a working tree).
        config_path: the config file relative to each root.
        evals: the response cache's Redis and mode, clocks and printer for model calls;
            None for no cache (worker/evals/context.py).

    Returns:
        The gate report; ``config_error`` is set when the head config or a head dataset is
        invalid. A missing or invalid config at base only skips the relative rules (noted).
        The gate rules are base's (a pull request cannot loosen its own gate); where head
        changes them the stricter applies and the report notes the difference
        (worker/evals/rules.py).

    Raises:
        ExecutionError: the run itself failed (not the user's configuration).
    """
    try:
        head_config = read_config(head_root, config_path)
        if head_config is None:
            raise ConfigError(config_path, None, f"no {config_path} at head: add one to gate")
        head_run = await run_config(head_config, head_root, head_sha, evals,
                                    with_base=base_root is not None)
    except ConfigError as err:
        return config_error_report(err)
    notes: list[str] = []
    base_run = await _base_run(base_root, base_sha, config_path, notes, evals) \
        if base_root else None
    try:
        head_run = await judge_pairs(head_config, head_run, base_run, evals)
    except ConfigError as err:
        return config_error_report(err, head_run)
    if base_root is None:
        notes.append("no base given: only absolute rules (min) apply")
    base_config = _base_rules(base_root, config_path) if base_root else None
    rules, changes = merge_rules(base_config, head_config)
    return finish_report(compare(rules, head_run, base_run, [*notes, *changes]), head_config)


def _base_rules(base_root: Path, config_path: str) -> Config | None:
    """Return the base config whose gate rules apply (None when absent or invalid at base)."""
    try:
        return read_config(base_root, config_path)
    except ConfigError:
        return None


async def _base_run(
    base_root: Path, base_sha: str, config_path: str, notes: list[str],
    evals: EvalContext | None = None,
) -> RunResult | None:
    try:
        base_config = read_config(base_root, config_path)
        if base_config is None:
            notes.append(f"no {config_path} at base: relative rules skipped")
            return None
        return await run_config(base_config, base_root, base_sha, evals)
    except ConfigError as err:
        notes.append(f"base could not be evaluated ({err}): relative rules skipped")
        return None
