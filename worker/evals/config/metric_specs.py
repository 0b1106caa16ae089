"""Parse a suite's ``metrics:`` list: custom metrics from Python (pure).

Format (worker/evals/score/custom_metrics.py runs them)::

    metrics:
      - name: polite                             # gate rules name it custom.polite
        function: evals/metrics.py:polite        # or entry_point: polite (llmgate.metrics)
        per_example: true                        # fn(result) per example; default false:
                                                 # fn(results) once for the suite

Errors are raised through the config reader, so each names the file and line.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from yaml.nodes import Node

from worker.errors import ConfigError
from worker.evals.config.spelling import as_written
from worker.evals.types import MetricSpec

METRIC_KEYS = ("name", "type", "function", "entry_point", "per_example")
#: Prefix of a custom metric's name in gate rules and reports.
CUSTOM_PREFIX = "custom."
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
_FUNCTION = re.compile(r"(?P<path>[^:]+\.py):(?P<name>[A-Za-z_][A-Za-z0-9_]*)\Z")


class Reader(Protocol):
    """The parts of the config reader this uses (see worker/evals/config/load.py)."""

    def error(self, node: Node, message: str) -> ConfigError:
        """Return a ConfigError at ``node``'s line."""

    def value(self, node: Node) -> Any:
        """Return the plain value of ``node``."""

    def mapping(self, node: Node, what: str, known: tuple[str, ...] = ()) -> dict[str, Any]:
        """Return the entries of a mapping node, refusing unknown keys."""

    def sequence(self, node: Node, what: str) -> list[Node]:
        """Return the items of a sequence node."""


def parse_metrics(reader: Reader, node: Node) -> tuple[MetricSpec, ...]:
    """Parse ``metrics:`` into `MetricSpec` entries.

    Raises:
        ConfigError: a missing or malformed key, a type other than ``python``, a name used
            twice.
    """
    specs: list[MetricSpec] = []
    for item in reader.sequence(node, "`metrics`"):
        entries = reader.mapping(item, "a metric", METRIC_KEYS)
        spec = _spec(reader, item, entries)
        if any(s.name == spec.name for s in specs):
            raise reader.error(item, f"metric {spec.name!r} is defined twice in this suite")
        specs.append(spec)
    return tuple(specs)


def _spec(reader: Reader, item: Node, entries: dict[str, Any]) -> MetricSpec:
    if "name" not in entries:
        raise reader.error(item, "a metric needs `name`, e.g. `- {name: polite, type: python, "
                           "function: evals/metrics.py:polite}`")
    name = reader.value(entries["name"][1])
    if not isinstance(name, str) or not _NAME.match(name):
        raise reader.error(entries["name"][1], "a metric's `name` must be letters, digits and "
                           "'_' (gate rules name it custom.<name>), got "
                           f"{as_written(entries['name'][1])}")
    kind = reader.value(entries["type"][1]) if "type" in entries else None
    if kind != "python":
        node = entries["type"][1] if "type" in entries else item
        raise reader.error(node, f"metric {name!r} needs `type: python` (the only kind), got "
                           f"{as_written(node) if 'type' in entries else 'no `type`'}")
    if ("function" in entries) == ("entry_point" in entries):
        raise reader.error(item, f"metric {name!r} needs exactly one of `function: "
                           "path/to/file.py:fn` or `entry_point: name` (group llmgate.metrics)")
    function = entry_point = None
    if "function" in entries:
        function = _function(reader, entries["function"][1], name)
    else:
        entry_point = reader.value(entries["entry_point"][1])
        if not isinstance(entry_point, str) or not entry_point:
            raise reader.error(entries["entry_point"][1], f"`entry_point` of metric {name!r} "
                               "must be a name in the llmgate.metrics group")
    per_example = reader.value(entries["per_example"][1]) if "per_example" in entries else False
    if not isinstance(per_example, bool):
        raise reader.error(entries["per_example"][1], f"`per_example` of metric {name!r} must "
                           f"be true or false, got {as_written(entries['per_example'][1])}")
    return MetricSpec(name, function, entry_point, per_example, int(item.start_mark.line) + 1)


def _function(reader: Reader, node: Node, name: str) -> str:
    value = reader.value(node)
    match = _FUNCTION.match(str(value))
    if match is None or match["path"].startswith("/") or ".." in match["path"].split("/"):
        raise reader.error(node, f"`function` of metric {name!r} must be "
                           "`path/to/file.py:function_name`, a path inside the repository, "
                           f"got {as_written(node)}")
    return str(value)


def custom_names(specs: tuple[MetricSpec, ...]) -> dict[str, MetricSpec]:
    """Return gate name (``custom.<name>``) -> spec."""
    return {CUSTOM_PREFIX + s.name: s for s in specs}
