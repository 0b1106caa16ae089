"""How a config error echoes a bad value: as the file spells it, never as Python does (pure).

``looks: true`` is reported as ``got true``, not ``got True``; a missing value as ``nothing``
(YAML, `as_written`) or ``null`` (JSON and YAML datasets, `as_data`). Strings stay quoted
(``'newest'``), so ``'true'`` the string and ``true`` the boolean read apart.
"""

from __future__ import annotations

import json

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

#: Longest spelling of a value an error message echoes, characters.
MAX_WRITTEN_CHARS = 80
#: Deepest nesting spelled out (deeper parts are ``...``).
MAX_DEPTH = 64
_STR_TAG = "tag:yaml.org,2002:str"


def as_written(node: Node) -> str:
    """Return ``node`` as the YAML spells it, for the ``got ...`` of a config error (pure).

    A string is quoted (``'newest'``); any other scalar is echoed as written (``true``,
    ``yes``, ``~``, ``1e3``, not Python's ``True``, ``None``, ``1000.0``), an empty value as
    ``nothing``; a mapping or a list in flow style (``{looks: true}``, ``[1, 2]``). At most
    `MAX_WRITTEN_CHARS` characters (a longer spelling ends in ``...``).
    """
    if isinstance(node, ScalarNode) and node.tag != _STR_TAG and not node.value:
        return "nothing"
    return _clip(_written(node, MAX_WRITTEN_CHARS))


def _written(node: Node, budget: int, depth: int = 0) -> str:
    """``node`` in flow style, stopping once ``budget`` characters are written."""
    if isinstance(node, ScalarNode):
        return repr(node.value) if node.tag == _STR_TAG else str(node.value or "null")
    if depth >= MAX_DEPTH or not isinstance(node, MappingNode | SequenceNode):
        return "..."
    parts: list[str] = []
    for item in node.value:
        if sum(len(p) + 2 for p in parts) > budget:
            parts.append("...")
            break
        if isinstance(node, MappingNode):
            key, value = item
            name = key.value if isinstance(key, ScalarNode) else _written(key, budget, depth + 1)
            parts.append(f"{name}: {_written(value, budget, depth + 1)}")
        else:
            parts.append(_written(item, budget, depth + 1))
    inner = ", ".join(parts)
    return f"{{{inner}}}" if isinstance(node, MappingNode) else f"[{inner}]"


def as_data(value: object) -> str:
    """Return a parsed dataset or labels value as JSON spells it, a string quoted (pure).

    ``True`` -> ``true``, ``None`` -> ``null``, ``[1, "a"]`` -> ``[1, "a"]``, ``'x'`` -> ``'x'``;
    at most `MAX_WRITTEN_CHARS` characters (a longer spelling ends in ``...``).
    """
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=repr,
                                                                  ensure_ascii=False)
    return _clip(text)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_WRITTEN_CHARS else text[:MAX_WRITTEN_CHARS - 3] + "..."
