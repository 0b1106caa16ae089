"""Config keys of which base a pull request is compared with and which suites it needs (pure).

Called by the reader of worker/evals/config/load.py, so errors name the file and line::

    settings:
      base: merge_base              # or tip: compare with the base branch's tip
      on_paths_conclusion: success  # or skipped: the check when every suite is skipped
    suites:
      - name: support
        on_paths: ["prompts/**", "bot/**", "evals/support.jsonl"]

All three are read from the BASE side by the worker (a pull request cannot change which base
it is compared with, nor skip its own gate); worker/pipeline/on_paths.py applies the globs.
Globs match whole repository paths (POSIX, relative to the root), segment by segment:

- ``*`` matches any characters but ``/``; ``?`` one character but ``/``; ``[abc]``/``[!abc]``
  one character of (or not of) a set;
- ``**`` as a whole segment matches any number of directories (``prompts/**`` is everything
  under ``prompts/``, ``**/*.md`` every Markdown file);
- a pattern starting with ``!`` excludes what it matches; later patterns win, so
  ``["prompts/**", "!prompts/README.md"]`` ignores a change to that one file.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache
from typing import Literal, cast

from yaml.nodes import Node, SequenceNode

from worker.evals.config.reader import Entries, Reader
from worker.evals.config.spelling import as_written
from worker.evals.types import Settings

#: Keys of ``settings:`` parsed here.
PATH_SETTINGS_KEYS = ("base", "on_paths_conclusion")
#: Values of ``settings.base`` and ``settings.on_paths_conclusion``.
BASE_MODES = ("merge_base", "tip")
SKIP_CONCLUSIONS = ("success", "skipped")
#: Globs one suite's ``on_paths`` may list.
MAX_ON_PATHS = 100


def settings_paths(reader: Reader, entries: Entries, settings: Settings) -> Settings:
    """Return ``settings`` with ``base`` and ``on_paths_conclusion`` from ``entries`` applied.

    Raises:
        ConfigError: a value is not one of the allowed words (at its line).
    """
    base, conclusion = settings.base, settings.on_paths_conclusion
    if "base" in entries:
        base = cast(Literal["merge_base", "tip"],
                    _choice(reader, entries["base"][1], "`base`", BASE_MODES))
    if "on_paths_conclusion" in entries:
        conclusion = cast(Literal["success", "skipped"], _choice(
            reader, entries["on_paths_conclusion"][1], "`on_paths_conclusion`", SKIP_CONCLUSIONS))
    return replace(settings, base=base, on_paths_conclusion=conclusion)


def on_paths(reader: Reader, node: Node) -> tuple[str, ...]:
    """Return a suite's ``on_paths`` globs (a non-empty list of relative path globs).

    Raises:
        ConfigError: not a list, empty, too long, or a glob that is not a string, is absolute,
            uses ``\\`` or has an unclosed ``[`` (at the offending item's line).
    """
    if not isinstance(node, SequenceNode):
        raise reader.error(node, "`on_paths` must be a list of path globs, e.g. [\"prompts/**\"]")
    if not node.value:
        raise reader.error(node, "`on_paths` is empty: list globs, or remove the key to run "
                           "the suite on every pull request")
    if len(node.value) > MAX_ON_PATHS:
        raise reader.error(node, f"`on_paths` may list at most {MAX_ON_PATHS} globs")
    globs = []
    for item in node.value:
        value = reader.value(item)
        if not isinstance(value, str) or not value.strip():
            raise reader.error(item, "`on_paths` entries must be non-empty strings, "
                               f"got {as_written(item)}")
        if "\\" in value:
            raise reader.error(item, f"`on_paths`: use / in globs, got {as_written(item)}")
        try:
            glob_regex(value.removeprefix("!"))
        except ValueError as err:
            raise reader.error(item, f"`on_paths`: {err}") from None
        globs.append(value)
    return tuple(globs)


def _choice(reader: Reader, node: Node, what: str, allowed: tuple[str, ...]) -> str:
    value = reader.value(node)
    if value not in allowed:
        raise reader.error(node, f"{what} must be one of {', '.join(allowed)}, "
                           f"got {as_written(node)}")
    return str(value)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Return the compiled regular expression of one glob (without its ``!``).

    Raises:
        ValueError: the glob is empty, absolute, or has an unclosed ``[``.
    """
    return _compile(pattern)


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> re.Pattern[str]:
    if not pattern or pattern.startswith("/"):
        raise ValueError(f"{pattern!r}: a glob must be a non-empty path relative to the root")
    parts = []
    segments = pattern.split("/")
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == "**":
            parts.append(".*" if last else "(?:[^/]*/)*")
        else:
            parts.append(_segment(segment) + ("" if last else "/"))
    return re.compile("".join(parts) + r"\Z")


def _segment(segment: str) -> str:
    out, i = [], 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = segment.find("]", i + 2)
            if end < 0:
                raise ValueError(f"{segment!r}: unclosed '[' in a glob")
            body = segment[i + 1:end]
            negate = body.startswith("!")
            body = re.sub(r"([\\\]^])", r"\\\1", body[1:] if negate else body)
            out.append(f"[{'^/' if negate else ''}{body}]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)
