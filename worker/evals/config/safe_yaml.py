"""Compose untrusted YAML into nodes with bounded time and memory (pure).

``yaml.compose`` with ``SafeLoader`` runs no code, but a small file can still ask for a huge
amount of work later: "billion laughs" (each anchor a list of ten aliases of the previous one)
composes into a few dozen nodes that expand to 10^9 values when constructed, an alias to its
own anchor makes an infinite structure, and deep nesting overflows the stack. Before anything
is constructed this module refuses, with a `ConfigError` naming the file (and line):

- a text longer than `MAX_YAML_CHARS` or a line longer than `MAX_LINE_CHARS`;
- more than `MAX_ALIASES` aliases;
- a document whose expanded size (every alias counted as a copy of its anchor) exceeds
  `MAX_EXPANDED_NODES`, or that nests deeper than `MAX_DEPTH`, or that contains itself.

The expanded size is computed once per distinct node (memoised), iteratively, so checking a
bomb costs time linear in the composed graph, not in its expansion.
"""

from __future__ import annotations

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from worker.errors import ConfigError

#: Largest YAML text accepted, characters (1 MiB; a config is a few KB).
MAX_YAML_CHARS = 1 << 20
#: Longest line accepted, characters.
MAX_LINE_CHARS = 10_000
#: Most aliases (``*name``) in one document.
MAX_ALIASES = 1_000
#: Most nodes once every alias is expanded.
MAX_EXPANDED_NODES = 100_000
#: Deepest nesting of mappings and sequences.
MAX_DEPTH = 64


class _CountingLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML has no types
    """A SafeLoader that counts the aliases it composes and stops past `MAX_ALIASES`, and
    counts lines as GitHub shows them (`forward`)."""

    aliases = 0

    def forward(self, length: int = 1) -> None:
        """Move ``length`` characters on, counting a line only at ``\\n`` (so at ``\\r\\n``).

        PyYAML (YAML 1.1) also starts a line at a lone ``\\r``, U+0085, U+2028 and U+2029;
        GitHub, git and every other dataset format of llmgate do not, so a mark after one of
        them named a line too low and the annotation missed its example (field case: a quoted
        input holding U+2028 put the next example's error one line low). Only the marks
        change; what the scanner reads as a break inside a scalar is left to PyYAML.
        """
        if self.pointer + length + 1 >= len(self.buffer):
            self.update(length + 1)
        while length:
            ch = self.buffer[self.pointer]
            self.pointer += 1
            self.index += 1
            if ch == "\n":
                self.line += 1
                self.column = 0
            elif ch != "\ufeff":
                self.column += 1
            length -= 1

    def compose_node(self, parent: Node | None, index: object) -> Node | None:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                mark = self.peek_event().start_mark
                raise _Refused(f"more than {MAX_ALIASES} aliases (`*name`); expand them by hand",
                               int(mark.line) + 1)
        node: Node | None = super().compose_node(parent, index)
        return node


class _Refused(Exception):
    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message, self.line = message, line


def compose(text: str, path: str) -> Node | None:
    """Compose ``text`` into YAML nodes after checking every bound in the module doc.

    Args:
        text: the YAML text.
        path: the file's path relative to the repository root, for errors.

    Returns:
        The root node, or None for an empty document.

    Raises:
        ConfigError: a bound is exceeded, or the document nests too deeply for the parser.
        yaml.YAMLError: a syntax error (the caller reports its line).
    """
    _check_text(text, path)
    loader = _CountingLoader(text)
    try:
        root: Node | None = loader.get_single_node()
    except _Refused as refused:
        raise ConfigError(path, refused.line, refused.message) from None
    except RecursionError:
        raise ConfigError(path, None, f"nested too deeply (more than {MAX_DEPTH} levels); "
                          "flatten the structure") from None
    finally:
        loader.dispose()
    if root is not None:
        try:
            expanded_size(root)
        except _Refused as refused:
            raise ConfigError(path, refused.line, refused.message) from None
        _refuse_surrogates(root, path)
    return root


def lone_surrogate(text: str) -> str | None:
    """Return the first lone surrogate (U+D800-U+DFFF) in ``text``, or None.

    A ``\\ud800`` escape in JSON or YAML decodes to one: text that no UTF-8 encoder writes, so
    it crashed every run that hashed, stored or handed on the value (fresh user, issue 31).
    """
    return next((c for c in text if "\ud800" <= c <= "\udfff"), None)


def surrogate_message(char: str) -> str:
    """The error for a value holding the lone surrogate ``char`` (`lone_surrogate`)."""
    return (f"a lone surrogate escape (\\u{ord(char):04x}) is not Unicode text; write the "
            "character itself")


def _refuse_surrogates(root: Node, path: str) -> None:
    """Raise `ConfigError` at the line of the first scalar holding a lone surrogate."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node.value, str):
            found = lone_surrogate(node.value)
            if found is not None:
                raise ConfigError(path, _line(node), surrogate_message(found))
        else:
            stack.extend(_children(node))


def _check_text(text: str, path: str) -> None:
    if len(text) > MAX_YAML_CHARS:
        raise ConfigError(path, None, f"the file has {len(text)} characters; the limit is "
                          f"{MAX_YAML_CHARS}")
    for number, line in enumerate(text.split("\n"), start=1):
        if len(line) > MAX_LINE_CHARS:
            raise ConfigError(path, number, f"line {number} has {len(line)} characters; the "
                              f"limit is {MAX_LINE_CHARS}")


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def expanded_size(root: Node) -> int:
    """Return how many nodes ``root`` has with every alias expanded (at most the bound + 1).

    Raises:
        _Refused: the size exceeds `MAX_EXPANDED_NODES`, the depth `MAX_DEPTH`, or the
            document contains itself (a recursive alias).
    """
    sizes: dict[int, int] = {}
    entered: set[int] = set()
    stack: list[tuple[Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, finished = stack.pop()
        key = id(node)
        if finished:
            entered.discard(key)
            total = 1 + sum(sizes[id(child)] for child in _children(node))
            sizes[key] = min(total, MAX_EXPANDED_NODES + 1)
            if total > MAX_EXPANDED_NODES:
                raise _Refused(f"the document expands to more than {MAX_EXPANDED_NODES} values "
                               "through anchors and aliases (a YAML bomb?)", _line(node))
            continue
        if key in sizes:
            continue
        if key in entered:
            raise _Refused("an alias refers to the structure that contains it (a recursive "
                           "anchor); YAML configs must be finite", _line(node))
        if depth > MAX_DEPTH:
            raise _Refused(f"nested more than {MAX_DEPTH} levels deep; flatten the structure",
                           _line(node))
        entered.add(key)
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in _children(node))
    return sizes[id(root)]


def _line(node: Node) -> int:
    return int(node.start_mark.line) + 1

