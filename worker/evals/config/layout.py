"""Config keys of a repository with several configs: ``configs:``, ``discover:``, ``checks`` (pure).

Called by the reader of worker/evals/config/load.py, so errors name the file and line::

    version: 1
    settings:
      checks: per_config        # or combined (default): how the configs report
    configs:                    # more configs to gate: folders or their .llmgate.yml files
      - services/a
      - services/b/.llmgate.yml
    # or: discover: true        # gate every .llmgate.yml in the repository's folders

A root config with ``configs:`` or ``discover: true`` may have no ``suites``. What the keys do
(which commit they are read from, how each config runs) is worker/pipeline/plan.py.
"""

from __future__ import annotations

import posixpath
import re
from typing import Literal, cast

from yaml.nodes import Node, SequenceNode

from worker.evals.config.reader import Reader
from worker.evals.config.spelling import as_written
from worker.evals.types import CONFIG_FILENAME, ConfigRef

#: Keys of ``settings:`` parsed here, and the values of ``settings.checks``.
LAYOUT_SETTINGS_KEYS = ("checks",)
CHECK_MODES = ("combined", "per_config")
#: Configs one repository may gate: each runs its suites, and GitHub shows each check run.
MAX_CONFIGS = 50
#: Longest config path accepted, characters (it becomes part of a check run's name).
MAX_PATH_CHARS = 200
#: A path segment that is not a plain file or folder name of the repository.
_BAD_CHARS = re.compile(r"[\x00-\x1f\x7f\\]")



def checks_mode(reader: Reader, node: Node) -> Literal["combined", "per_config"]:
    """Return ``settings.checks`` (``combined`` or ``per_config``).

    Raises:
        ConfigError: any other value (at its line).
    """
    value = reader.value(node)
    if value not in CHECK_MODES:
        raise reader.error(node, f"`checks` must be one of {', '.join(CHECK_MODES)}, "
                           f"got {as_written(node)}")
    return cast(Literal["combined", "per_config"], value)


def discover_flag(reader: Reader, node: Node) -> bool:
    """Return ``discover`` (true or false).

    Raises:
        ConfigError: not a boolean (at its line).
    """
    value = reader.value(node)
    if not isinstance(value, bool):
        raise reader.error(node, "`discover` must be true or false")
    return value


def config_refs(reader: Reader, node: Node) -> tuple[ConfigRef, ...]:
    """Return the ``configs:`` entries as repository paths of ``.llmgate.yml`` files.

    Each entry is a folder (``services/a``) or the path of its config file
    (``services/a/.llmgate.yml``), relative to the repository root.

    Raises:
        ConfigError: not a non-empty list of at most `MAX_CONFIGS` strings; an entry that is
            absolute, leaves the repository, names the root config, names a file other than
            ``.llmgate.yml`` or is listed twice (at the entry's line).
    """
    if not isinstance(node, SequenceNode):
        raise reader.error(node, "`configs` must be a list of folders, e.g. [services/a]")
    if not node.value:
        raise reader.error(node, "`configs` is empty: list folders holding a .llmgate.yml, "
                           "or remove the key")
    if len(node.value) > MAX_CONFIGS:
        raise reader.error(node, f"`configs` may list at most {MAX_CONFIGS} configs")
    refs: dict[str, ConfigRef] = {}
    for item in node.value:
        path = _entry_path(reader, item)
        if path in refs:
            raise reader.error(item, f"`configs`: {path} is listed twice "
                               f"(first at line {refs[path].line})")
        refs[path] = ConfigRef(path, int(item.start_mark.line) + 1)
    return tuple(refs.values())


def _entry_path(reader: Reader, item: Node) -> str:
    """Return the config file path of one ``configs:`` entry, or raise at its line."""
    raw = reader.value(item)
    if not isinstance(raw, str) or not raw.strip():
        raise reader.error(item, f"`configs` entries must be folder paths, got {as_written(item)}")
    normal = posixpath.normpath(raw.strip())
    if raw.startswith("/") or re.match(r"[A-Za-z]:", raw) or _BAD_CHARS.search(raw) \
            or normal == ".." or normal.startswith("../"):
        raise reader.error(item, f"`configs`: {raw!r} must be a relative POSIX path inside "
                           "the repository")
    if posixpath.basename(normal) != CONFIG_FILENAME:
        if normal.endswith((".yml", ".yaml")):
            raise reader.error(item, f"`configs`: {raw!r}: a listed config must be named "
                               f"{CONFIG_FILENAME} (list its folder)")
        normal = posixpath.normpath(posixpath.join(normal, CONFIG_FILENAME))
    if normal == CONFIG_FILENAME:
        raise reader.error(item, "`configs`: the root .llmgate.yml is gated by itself when it "
                           "has suites; list only configs in folders")
    if len(normal) > MAX_PATH_CHARS:
        raise reader.error(item, f"`configs`: a path may have at most {MAX_PATH_CHARS} "
                           "characters")
    return normal
