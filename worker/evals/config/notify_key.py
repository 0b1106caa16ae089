"""The ``notify`` key of ``.llmgate.yml``: which suites' regressions on the default branch notify.

Format (top level of a config; absent means no notification)::

    notify:
      suites: all              # or a list of suite names: [tickets, summaries]

The config only opts in and names suites; where notifications go (a Slack incoming webhook, a
JSON webhook) is the operator's secret, in the worker's environment (worker/notify/channels.py),
never in the repository. The push job (worker/jobs/push.py) reads it at the pushed commit with
`worker.evals.config.load.read_notify`; the loader (worker/evals/config/load.py) validates it
with `parse_notify`, so a bad value is a config error annotated on its line, as every other key.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from worker.evals.config.reader import Reader
from worker.evals.config.spelling import as_written

#: The top-level key, and the keys it holds.
NOTIFY_KEY = "notify"
NOTIFY_KEYS = ("suites",)
#: ``suites:`` value naming every suite of the config.
ALL_SUITES = "all"


@dataclass(frozen=True)
class NotifyOptions:
    """A config's opt-in to notifications of default-branch regressions.

    Attributes:
        suites: the suite names whose regressions notify, or None for every suite
            (``suites: all``).
        line: 1-based line where the ``notify`` mapping starts (for messages), 0 when unknown.
    """

    suites: tuple[str, ...] | None
    line: int = 0

    def selects(self, names: Collection[str]) -> tuple[str, ...]:
        """Return the names of ``names`` (a config's suites, in order) that notify."""
        return tuple(n for n in names if self.suites is None or n in self.suites)


def parse_notify(reader: Reader, node: Node, suite_names: Collection[str]) -> NotifyOptions:
    """Return the ``notify`` mapping at ``node`` as `NotifyOptions`.

    Args:
        reader: the config reader (its errors carry the file and line).
        node: the value node of ``notify``.
        suite_names: the config's suite names (a root config that only lists other configs
            may not have ``notify``: worker/evals/config/load.py refuses it).

    Raises:
        ConfigError: not a mapping, an unknown key, ``suites`` missing, neither ``all`` nor a
            non-empty list of names, a name given twice or naming no suite (at its line).
    """
    entries = reader.mapping(node, "`notify`", NOTIFY_KEYS)
    if "suites" not in entries:
        raise reader.error(node, "`notify` is missing `suites` (`all`, or a list of suite "
                           "names)")
    value_node = entries["suites"][1]
    line = int(node.start_mark.line) + 1
    if isinstance(value_node, ScalarNode) and reader.value(value_node) == ALL_SUITES:
        return NotifyOptions(None, line)
    if not isinstance(value_node, SequenceNode) or not value_node.value:
        raise reader.error(value_node, "`notify.suites` must be `all` or a non-empty list of "
                           f"suite names, got {as_written(value_node)}")
    names: list[str] = []
    for item in value_node.value:
        name = reader.value(item)
        if not isinstance(name, str) or not name.strip():
            raise reader.error(item, "`notify.suites` entries must be suite names, got "
                               f"{as_written(item)}")
        if name in names:
            raise reader.error(item, f"`notify.suites` names {name!r} twice")
        if name not in suite_names:
            known = ", ".join(suite_names) or "none in this config"
            raise reader.error(item, f"`notify.suites` names {name!r}, which is not a suite "
                               f"of this config (suites: {known})")
        names.append(name)
    return NotifyOptions(tuple(names), line)


def notify_node(root: Node) -> Node | None:
    """Return the value node of the top-level ``notify`` key of a composed config, or None."""
    if not isinstance(root, MappingNode):
        return None
    for key, value in root.value:
        if isinstance(key, ScalarNode) and key.value == NOTIFY_KEY:
            return value
    return None


def suite_names(root: Node | None) -> tuple[str, ...]:
    """Return the ``name`` of each entry of a composed config's ``suites`` list (plain
    scalars; entries without one are left out)."""
    if not isinstance(root, MappingNode):
        return ()
    for key, value in root.value:
        if isinstance(key, ScalarNode) and key.value == "suites" and \
                isinstance(value, SequenceNode):
            return tuple(entry.value for item in value.value if isinstance(item, MappingNode)
                         for name, entry in item.value
                         if isinstance(name, ScalarNode) and name.value == "name"
                         and isinstance(entry, ScalarNode))
    return ()
