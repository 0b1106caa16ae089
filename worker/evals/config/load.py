"""Parse and validate ``.llmgate.yml`` into a `Config`, with the line of every error.

The YAML is composed into nodes (``yaml.compose`` with ``yaml.SafeLoader``, so no tags run
code) and walked by hand, so each error names the 1-based line of the offending node. Format::

    version: 1
    settings: {timeout: 60, concurrency: 4, env: [OPENAI_API_KEY]}   # optional
    suites:
      - name: tickets
        dataset: evals/tickets.jsonl
        target: {command: python3 bot.py {input_file} {output_file}}
        assertions: [{type: contains, value: refund}]
        gate: {pass_rate: {min: 0.80, max_drop: 0.05}}

A root config may also list or discover more configs (``configs:``, ``discover:``,
``settings.checks``; worker/evals/config/layout.py) and then needs no ``suites``.
"""

from __future__ import annotations

import math
import posixpath
import re
import shlex
from pathlib import Path
from typing import Any, Literal

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from worker.errors import ConfigError
from worker.evals.config import consistency as config_consistency
from worker.evals.config import judge_rules as config_judge
from worker.evals.config import layout as config_layout
from worker.evals.config import llm_suites as config_llm
from worker.evals.config import notify_key as config_notify
from worker.evals.config import paths as config_paths
from worker.evals.config import safe_yaml
from worker.evals.config import stats_settings as config_stats
from worker.evals.config.dataset_formats import csv_columns
from worker.evals.config.files import decode_utf8, read_repo_file
from worker.evals.config.gate_rules import parse_gate
from worker.evals.config.metric_specs import parse_metrics
from worker.evals.config.reader import Entries
from worker.evals.config.spelling import as_written
from worker.evals.score import check_tool_names, validate_spec
from worker.evals.types import (
    CONFIG_FILENAME,
    AssertionSpec,
    CommandTarget,
    Config,
    ConfigRef,
    GateOptions,
    GateRule,
    ModelTarget,
    Settings,
    SuiteConfig,
)
from worker.security import FORBIDDEN_ENV_PREFIXES, is_allowed_env_name, is_env_name

#: The only config schema version.
SUPPORTED_VERSION = 1
TOP_KEYS = ("version", "settings", "suites", "untrusted", "configs", "discover",
            config_notify.NOTIFY_KEY)
#: Bounds a pull request cannot raise: one invocation's time (the worker's job limit, seconds)
#: and target processes at once per suite.
MAX_TIMEOUT_S = 3600
MAX_CONCURRENCY = 64
#: Values of ``untrusted:`` (read from the base branch only; see worker/gate/trust.py).
UNTRUSTED_POLICIES = ("approve", "never", "run")
#: Values of ``settings.drafts`` (read from the base branch only; see worker/gate/drafts.py).
DRAFT_POLICIES = ("run", "skip")
#: Values of ``settings.undecided`` (read from the base branch only; see
#: worker/evals/verdict/health.py).
UNDECIDED_POLICIES = ("action_required", "neutral")
SETTINGS_KEYS = ("timeout", "concurrency", "env", *config_llm.LLM_SETTINGS_KEYS,
                 *config_paths.PATH_SETTINGS_KEYS, "drafts", "undecided",
                 *config_layout.LAYOUT_SETTINGS_KEYS, *config_stats.STATS_SETTINGS_KEYS)
SUITE_KEYS = ("name", "dataset", "target", "assertions", "gate", "traps", "on_paths", "type",
              "consistency", "judge", "metrics", "columns")
TARGET_KEYS = ("command", "batch")
PLACEHOLDERS = ("{input_file}", "{output_file}")



#: The JSON Schema (draft 2020-12) of this format for editors, shipped with the package; a copy
#: is docs/llmgate.schema.json. It checks the shape; this loader checks more (paths, globs, which
#: rules fit which metric): tests/unit/evals/config/test_config_schema.py keeps the two agreeing.
CONFIG_SCHEMA = Path(__file__).with_name("llmgate.schema.json")

#: Largest config file read, bytes: room for `safe_yaml.MAX_YAML_CHARS` characters of UTF-8.
MAX_CONFIG_BYTES = 4 * safe_yaml.MAX_YAML_CHARS


def load_config(root: Path) -> Config | None:
    """Read and parse ``.llmgate.yml`` at the root of a checkout.

    Returns:
        The config, or None when the file does not exist.

    Raises:
        ConfigError: the file is invalid, unreadable, or a symlink leading outside ``root``.
    """
    path = root / CONFIG_FILENAME
    if not path.exists() and not path.is_symlink():
        return None
    if not path.resolve().is_relative_to(root.resolve()) or not path.is_file():
        raise ConfigError(CONFIG_FILENAME, None, "must be a regular file inside the repository")
    data = read_repo_file(root, CONFIG_FILENAME, MAX_CONFIG_BYTES)
    text = decode_utf8(data, CONFIG_FILENAME)
    return parse_config(text, CONFIG_FILENAME)


def parse_config(text: str, path: str = CONFIG_FILENAME) -> Config:
    """Parse the text of a config file (pure).

    Args:
        text: the YAML text.
        path: the file's path relative to the repository root, used in errors.

    Returns:
        The validated config; dataset paths are normalised POSIX paths.

    Raises:
        ConfigError: with the 1-based line of the problem and how to fix it.
    """
    try:
        root = safe_yaml.compose(text, path)  # bounded: no YAML bombs, no huge lines
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(path, line, f"YAML syntax error: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(path, None, f"YAML error: {exc}") from None
    if root is None:
        raise ConfigError(path, 1, "the file is empty; start with `version: 1` and `suites:`")
    return config_llm.check_models(_Reader(path).config(root))


def read_notify(root: Path,
                config_path: str = CONFIG_FILENAME) -> config_notify.NotifyOptions | None:
    """Return the ``notify`` options of the config at ``root / config_path`` (a checkout or a
    config's folder), or None when the file or the key is absent
    (worker/evals/config/notify_key.py).

    Raises:
        ConfigError: the file is unreadable, not YAML, or ``notify`` is invalid (its line).
    """
    if not (root / config_path).is_file():
        return None
    text = decode_utf8(read_repo_file(root, config_path, MAX_CONFIG_BYTES), config_path)
    try:
        composed = safe_yaml.compose(text, config_path)
    except yaml.YAMLError as exc:
        raise ConfigError(config_path, None, f"YAML error: {exc}") from None
    node = config_notify.notify_node(composed) if composed is not None else None
    if node is None:
        return None
    return config_notify.parse_notify(_Reader(config_path), node,
                                      config_notify.suite_names(composed))


class _Reader:
    """Walks composed YAML nodes, raising `ConfigError` at the offending node's line."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._constructor = SafeConstructor()

    def error(self, node: Node, message: str) -> ConfigError:
        return ConfigError(self.path, int(node.start_mark.line) + 1, message)

    def value(self, node: Node) -> Any:
        try:
            return self._constructor.construct_document(node)
        except (yaml.YAMLError, ValueError, TypeError, LookupError, ArithmeticError,
                RecursionError) as exc:  # PyYAML on odd input: `!!int ''`, a 5000-digit int
            problem = getattr(exc, "problem", None) or exc
            raise self.error(node, f"YAML value error: {problem}") from None

    def mapping(self, node: Node, what: str, known: tuple[str, ...] = ()) -> Entries:
        if not isinstance(node, MappingNode):
            raise self.error(node, f"{what} must be a mapping (key: value lines)")
        entries: Entries = {}
        for key_node, value_node in node.value:
            key = self.value(key_node) if isinstance(key_node, ScalarNode) else None
            if not isinstance(key, str):
                raise self.error(key_node, f"{what}: keys must be plain strings")
            if key in entries:
                raise self.error(key_node, f"{what}: duplicate key {key!r}")
            if known and key not in known:
                raise self.error(key_node, f"{what}: unknown key {key!r} "
                                 f"(known keys: {', '.join(known)})")
            entries[key] = (key_node, value_node)
        return entries

    def sequence(self, node: Node, what: str) -> list[Node]:
        if not isinstance(node, SequenceNode):
            raise self.error(node, f"{what} must be a list (lines starting with `- `)")
        return list(node.value)

    def required(self, entries: Entries, key: str, parent: Node, what: str) -> Node:
        if key not in entries:
            raise self.error(parent, f"{what} is missing `{key}`")
        return entries[key][1]

    def string(self, node: Node, what: str) -> str:
        value = self.value(node)
        if not isinstance(value, str) or not value.strip():
            raise self.error(node, f"{what} must be a non-empty string")
        return value

    def fraction(self, node: Node, what: str) -> float:
        value = self.value(node)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise self.error(node, f"{what} must be a number from 0 to 1, got {as_written(node)}")
        return float(value)

    def config(self, root: Node) -> Config:
        entries = self.mapping(root, "the config", TOP_KEYS)
        version_node = self.required(entries, "version", root, "the config")
        version = self.value(version_node)
        if isinstance(version, bool) or version != SUPPORTED_VERSION:
            raise self.error(version_node, f"unsupported version {as_written(version_node)} "
                             f"(supported: {SUPPORTED_VERSION})")
        settings = self.settings(entries["settings"][1]) if "settings" in entries else Settings()
        if "untrusted" in entries:
            self.choice(entries["untrusted"][1], "`untrusted`", UNTRUSTED_POLICIES)
        layout = self.layout(entries)
        notify = entries.get(config_notify.NOTIFY_KEY)
        if "suites" not in entries and (layout[0] or layout[1]):  # a monorepo's root config
            if notify is not None:  # it would notify nothing: each config opts in itself
                raise self.error(notify[0], "`notify` in a root config that only lists other "
                                 "configs would notify nothing: a push is compared per config, "
                                 "so put `notify:` in each listed config that should notify")
            return Config(SUPPORTED_VERSION, (), settings, self.path, *layout)
        suites_node = self.required(entries, "suites", root, "the config")
        items = self.sequence(suites_node, "`suites`")
        if not items:
            raise self.error(suites_node, "`suites` is empty; add at least one suite")
        suites: dict[str, SuiteConfig] = {}
        for item in items:
            suite = self.suite(item)
            if suite.name in suites:
                raise self.error(item, f"duplicate suite name {suite.name!r} "
                                 f"(first at line {suites[suite.name].line})")
            suites[suite.name] = suite
        if notify is not None:  # validated here; the push job reads it (`read_notify`)
            config_notify.parse_notify(self, notify[1], tuple(suites))
        return Config(SUPPORTED_VERSION, tuple(suites.values()), settings, self.path, *layout)

    def layout(self, entries: Entries) -> tuple[tuple[ConfigRef, ...], bool, int | None]:
        """Return ``configs``, ``discover`` and the line of the first of them (or None)."""
        refs = config_layout.config_refs(self, entries["configs"][1]) \
            if "configs" in entries else ()
        discover = config_layout.discover_flag(self, entries["discover"][1]) \
            if "discover" in entries else False
        keys = [entries[k][0] for k in ("configs", "discover") if k in entries]
        line = min(int(k.start_mark.line) + 1 for k in keys) if keys else None
        return refs, discover, line

    def choice(self, node: Node, what: str, allowed: tuple[str, ...]) -> str:
        value = self.value(node)
        if value not in allowed:
            raise self.error(node, f"{what} must be one of {', '.join(allowed)}, "
                             f"got {as_written(node)}")
        return str(value)

    def settings(self, node: Node) -> Settings:
        entries = self.mapping(node, "`settings`", SETTINGS_KEYS)
        default = Settings()
        timeout_s, concurrency, env = default.timeout_s, default.concurrency, default.env
        if "timeout" in entries:
            timeout_s = self.timeout(entries["timeout"][1])
        if "concurrency" in entries:
            concurrency = self.concurrency(entries["concurrency"][1])
        if "env" in entries:
            env = self.env(entries["env"][1])
        drafts: Literal["run", "skip"] = default.drafts
        if "drafts" in entries:
            value = self.choice(entries["drafts"][1], "`settings.drafts`", DRAFT_POLICIES)
            drafts = "skip" if value == "skip" else "run"
        checks = config_layout.checks_mode(self, entries["checks"][1]) \
            if "checks" in entries else default.checks
        undecided: Literal["action_required", "neutral"] = default.undecided
        if "undecided" in entries and self.choice(entries["undecided"][1],
                                                  "`settings.undecided`",
                                                  UNDECIDED_POLICIES) == "neutral":
            undecided = "neutral"
        settings = config_llm.settings_extras(
            self, entries, Settings(timeout_s, concurrency, env, drafts=drafts, checks=checks,
                                    undecided=undecided))
        settings = config_stats.settings_stats(self, entries, settings)
        return config_paths.settings_paths(self, entries, settings)

    def timeout(self, node: Node) -> float:
        value = self.value(node)
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or value <= 0:
            raise self.error(node, "`timeout` must be a number of seconds > 0, "
                             f"got {as_written(node)}")
        if value > MAX_TIMEOUT_S:
            raise self.error(node, f"`timeout` may be at most {MAX_TIMEOUT_S} seconds, got {value}")
        return float(value)

    def concurrency(self, node: Node) -> int:
        value = self.value(node)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.error(node, f"`concurrency` must be an integer >= 1, got {as_written(node)}")
        if value > MAX_CONCURRENCY:
            raise self.error(node, f"`concurrency` may be at most {MAX_CONCURRENCY}, got {value}")
        return value

    def env(self, node: Node) -> tuple[str, ...]:
        names = []
        for item in self.sequence(node, "`env`"):
            name = self.value(item)
            if not isinstance(name, str) or not is_env_name(name):
                raise self.error(item, f"`env` entries must be variable names, got {name!r}")
            if not is_allowed_env_name(name):
                raise self.error(item, f"{name} cannot be passed to targets: variables starting "
                                 f"with {', '.join(FORBIDDEN_ENV_PREFIXES)} are llmgate's own")
            names.append(name)
        return tuple(names)

    def suite(self, node: Node) -> SuiteConfig:
        entries = self.mapping(node, "a suite", SUITE_KEYS)
        name = self.string(self.required(entries, "name", node, "a suite"), "suite `name`")
        what = f"suite {name!r}"
        dataset = self.dataset(self.required(entries, "dataset", node, what))
        target = self.target(self.required(entries, "target", node, what), what)
        assertions = self.assertions(entries["assertions"][1]) if "assertions" in entries else ()
        metrics = parse_metrics(self, entries["metrics"][1]) if "metrics" in entries else ()
        gate, options = parse_gate(self, entries["gate"][1], what, metrics) \
            if "gate" in entries else ({}, GateOptions())
        traps = config_llm.repo_path(self, entries["traps"][1], "`traps`") \
            if "traps" in entries else None
        paths = config_paths.on_paths(self, entries["on_paths"][1]) if "on_paths" in entries \
            else ()
        judge = config_judge.judge_rules(self, entries["judge"][1], what) \
            if "judge" in entries else None
        if isinstance(target, ModelTarget):
            self.offered_tools(assertions, target)
        suite = SuiteConfig(name, dataset, target, assertions, gate,
                            int(node.start_mark.line) + 1, options, traps=traps, on_paths=paths,
                            judge=judge, metrics=metrics, columns=csv_columns(self, entries))
        return config_consistency.suite_type(self, entries, suite)

    def dataset(self, node: Node) -> str:
        raw = self.string(node, "`dataset`")
        normal = posixpath.normpath(raw)
        if raw.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", raw) or "\\" in raw:
            raise self.error(node, f"`dataset` must be a relative POSIX path, got {raw!r}")
        if normal == ".." or normal.startswith("../") or normal == ".":
            raise self.error(node, f"`dataset` must name a file inside the repository, got {raw!r}")
        return normal

    def target(self, node: Node, what: str) -> CommandTarget | ModelTarget:
        if isinstance(node, MappingNode) and any(
                isinstance(k, ScalarNode) and k.value == "model" for k, _ in node.value):
            return config_llm.model_target(self, node, what)
        entries = self.mapping(node, f"{what}: `target`", TARGET_KEYS)
        command_node = self.required(entries, "command", node, f"{what}: `target`")
        command = self.string(command_node, "`command`")
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise self.error(command_node, f"`command` cannot be split into words: {exc}") from None
        missing = [p for p in PLACEHOLDERS if not any(p in word for word in argv)]
        if missing:
            raise self.error(command_node, f"`command` must pass {' and '.join(missing)} to the "
                             "program (llmgate writes the input there and reads the output)")
        return CommandTarget(command, int(command_node.start_mark.line) + 1,
                             config_llm.batch_flag(self, entries))

    def assertions(self, node: Node) -> tuple[AssertionSpec, ...]:
        specs = []
        for item in self.sequence(node, "`assertions`"):
            entries = self.mapping(item, "an assertion")
            kind = self.string(self.required(entries, "type", item, "an assertion"), "`type`")
            params = {k: self.value(v) for k, (_, v) in entries.items() if k != "type"}
            spec = AssertionSpec(kind, params, int(item.start_mark.line) + 1)
            validate_spec(spec, self.path)
            specs.append(spec)
        return tuple(specs)

    def offered_tools(self, specs: tuple[AssertionSpec, ...], target: ModelTarget) -> None:
        offered = [tool.name for tool in target.tools]
        for spec in specs:
            def fail(message: str, spec: AssertionSpec = spec) -> ConfigError:
                return ConfigError(self.path, spec.line, f"assertion `{spec.type}`: {message}")

            check_tool_names(spec, offered, fail)

    def gate(self, node: Node, what: str) -> tuple[dict[str, GateRule], GateOptions]:
        return parse_gate(self, node, what)
