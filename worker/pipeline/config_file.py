"""Read a tree's config file (``.llmgate.yml`` or another path inside it) and its base mode.

The reading every caller shares: the gate (worker/pipeline/trees.py, worker/pipeline/plan.py,
worker/gate/evaluate.py), the push and notice jobs and ``llmgate`` commands. It needs the
config loader only (worker/evals/config/load.py), not the engine that runs a config.
"""

from __future__ import annotations

from pathlib import Path

from worker.errors import ConfigError
from worker.evals.config import (
    MAX_CONFIG_BYTES,
    decode_utf8,
    load_config,
    parse_config,
    read_repo_file,
)
from worker.evals.types import CONFIG_FILENAME, Config


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
    data = read_repo_file(root, config_path, MAX_CONFIG_BYTES)  # size-capped, no FIFO
    return parse_config(decode_utf8(data, config_path), config_path)


def base_mode(root: Path) -> str:
    """Return ``settings.base`` of the root config at ``root`` (``merge_base`` when absent or
    invalid: the gate reports a broken base config itself). Read at the base branch's tip
    (`worker.pipeline.plan.tip_reason`), it says whether a pull request is compared with the
    merge base or with its base branch's tip,
    on the App (worker/gate/evaluate.py) and in ``llmgate run`` alike."""
    try:
        config = read_config(root)
    except ConfigError:
        return "merge_base"
    return config.settings.base if config is not None else "merge_base"
