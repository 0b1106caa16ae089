"""Parse ``settings.statistics`` and ``settings.sequential`` (pure; read from base only).

Format (every key optional; docs/statistics.md, "Sound gating: paired statistics")::

    settings:
      statistics:
        method: signflip        # or holm
        primary_share: 0.8      # of alpha, to the tests of `primary: true` metrics
        group_share: 0.5        # of each metric's alpha, to its group tests
        draws: 2000             # random sign patterns (100-100000)
        confirm_flips: 0.25     # extra calls (fraction of a head run) to re-run flips
      sequential: true          # or {looks: 4, spending: haybittle_peto | obrien_fleming | pocock}
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal, cast

from yaml.nodes import MappingNode, Node

from worker.evals.config.reader import Entries, Reader
from worker.evals.config.spelling import as_written
from worker.evals.types import Settings, StatisticsSettings

#: Keys of ``settings`` parsed here.
STATS_SETTINGS_KEYS = ("statistics", "sequential")
STATISTICS_KEYS = ("method", "primary_share", "group_share", "draws", "confirm_flips")
SEQUENTIAL_KEYS = ("looks", "spending")
METHODS = ("signflip", "holm")
SPENDING = ("haybittle_peto", "obrien_fleming", "pocock")
Spending = Literal["haybittle_peto", "obrien_fleming", "pocock"]
#: Bounds of ``draws`` and ``looks``.
DRAWS = (100, 100_000)
LOOKS = (2, 10)


def settings_stats(reader: Reader, entries: Entries, settings: Settings) -> Settings:
    """Return ``settings`` with ``statistics`` and ``sequential`` from ``entries`` applied.

    Raises:
        ConfigError: an unknown key, a share outside 0-1, an out-of-range count or an unknown
            word (at its line).
    """
    values: dict[str, Any] = {}
    if "statistics" in entries:
        node = entries["statistics"][1]
        for key, (_, value) in reader.mapping(node, "`settings.statistics`",
                                              STATISTICS_KEYS).items():
            values[key] = _statistic(reader, key, value)
    if "sequential" in entries:
        values.update(_sequential(reader, entries["sequential"][1]))
    return replace(settings, statistics=replace(StatisticsSettings(), **values))


def _statistic(reader: Reader, key: str, node: Node) -> Any:
    what = f"`settings.statistics.{key}`"
    if key == "method":
        return _choice(reader, node, what, METHODS)
    if key == "draws":
        return _integer(reader, node, what, DRAWS)
    return reader.fraction(node, what)


def _sequential(reader: Reader, node: Node) -> dict[str, Any]:
    if not isinstance(node, MappingNode):
        value = reader.value(node)
        if not isinstance(value, bool):
            raise reader.error(node, "`settings.sequential` must be true, false or "
                               f"{{looks: 4, spending: haybittle_peto}}, got {as_written(node)}")
        return {"sequential": value}
    found: dict[str, Any] = {"sequential": True}
    for key, (_, value) in reader.mapping(node, "`settings.sequential`",
                                          SEQUENTIAL_KEYS).items():
        what = f"`settings.sequential.{key}`"
        found[key] = _integer(reader, value, what, LOOKS) if key == "looks" else cast(
            Spending, _choice(reader, value, what, SPENDING))
    return found


def _integer(reader: Reader, node: Node, what: str, bounds: tuple[int, int]) -> int:
    value = reader.value(node)
    if isinstance(value, bool) or not isinstance(value, int) or \
            not bounds[0] <= value <= bounds[1]:
        raise reader.error(node, f"{what} must be an integer from {bounds[0]} to {bounds[1]}, "
                           f"got {as_written(node)}")
    return value


def _choice(reader: Reader, node: Node, what: str, allowed: tuple[str, ...]) -> str:
    value = reader.value(node)
    if value not in allowed:
        raise reader.error(node, f"{what} must be one of {', '.join(allowed)}, "
                           f"got {as_written(node)}")
    return str(value)
