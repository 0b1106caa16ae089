"""The config reader as the section parsers see it (pure): a `Protocol` of the parts of
worker/evals/config/load.py's reader they call, so a section's module (llm_suites.py,
tools.py, paths.py...) needs neither load.py nor another section's module for the type.
"""

from __future__ import annotations

from typing import Any, Protocol

from yaml.nodes import Node

from worker.errors import ConfigError

#: A mapping node's entries: key -> (its key node, its value node), in file order.
Entries = dict[str, tuple[Node, Node]]


class Reader(Protocol):
    """The parts of the config reader the section parsers use (worker/evals/config/load.py).

    Attributes:
        path: the config file's path, as error messages name it.
    """

    path: str

    def error(self, node: Node, message: str) -> ConfigError:
        """Return a ConfigError at ``node``'s line."""

    def value(self, node: Node) -> Any:
        """Return the plain value of ``node``."""

    def mapping(self, node: Node, what: str, known: tuple[str, ...] = ()) -> Entries:
        """Return the entries of a mapping node, refusing unknown keys."""

    def sequence(self, node: Node, what: str) -> list[Node]:
        """Return the items of a sequence node."""

    def string(self, node: Node, what: str) -> str:
        """Return a non-empty string value."""

    def fraction(self, node: Node, what: str) -> float:
        """Return a number from 0 to 1."""
