"""Draft pull requests: gated or skipped, as ``settings.drafts`` at the BASE commit says.

The setting is read from the base commit only, so a pull request cannot skip its own gate.
``run`` (the default) gates drafts like any pull request; ``skip`` concludes a draft's check
run ``skipped`` with an explanation, and marking the pull request ready for review starts a
run. A draft cannot be merged, and GitHub counts ``skipped`` as passing a required check, so
the ``ready_for_review`` run is the one that guards the merge.
"""

from __future__ import annotations

import logging

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

from worker.checkout import Checkouts, GitError
from worker.contract import RepoRef
from worker.errors import ConfigError
from worker.evals.config import DRAFT_POLICIES, read_repo_file, safe_yaml
from worker.evals.types import CONFIG_FILENAME
from worker.github import GitHubClient

log = logging.getLogger(__name__)

#: What a draft does when the base config does not say (or cannot be read).
DEFAULT_DRAFTS = "run"
SKIPPED_TITLE = "llmgate: skipped (draft pull request)"


def _entry(node: Node | None, key: str) -> Node | None:
    if not isinstance(node, MappingNode):
        return None
    for key_node, value in node.value:
        if isinstance(key_node, ScalarNode) and key_node.value == key:
            return value
    return None


def drafts_from_config(text: str | None) -> str:
    """Return ``settings.drafts`` of a config text (``run`` or ``skip``), pure.

    Anything unreadable (no file, bad YAML, a YAML bomb, an unknown value) gives
    `DEFAULT_DRAFTS` (``run``): a broken base config never skips a gate.
    """
    if not text:
        return DEFAULT_DRAFTS
    try:
        root = safe_yaml.compose(text, "base config")
    except (ConfigError, yaml.YAMLError):
        return DEFAULT_DRAFTS
    value = _entry(_entry(root, "settings"), "drafts")
    if isinstance(value, ScalarNode) and value.value in DRAFT_POLICIES:
        return str(value.value)
    return DEFAULT_DRAFTS


async def read_base_drafts(checkouts: Checkouts, repo: RepoRef, base_sha: str,
                           token: str | None) -> str:
    """Return ``settings.drafts`` of ``.llmgate.yml`` at the base commit (`drafts_from_config`).

    A missing or unreadable config, or a git failure, gives ``run``.
    """
    key = f"{repo['owner']}/{repo['name']}"
    try:
        async with checkouts.worktree(key, repo["clone_url"], base_sha, token) as root:
            data = read_repo_file(root, CONFIG_FILENAME, safe_yaml.MAX_YAML_CHARS)
        return drafts_from_config(data.decode("utf-8", "replace"))
    except (ConfigError, GitError, ValueError, OSError) as err:
        log.info("base config of %s@%s unreadable (%s): drafts %s", key, base_sha[:7],
                 type(err).__name__, DEFAULT_DRAFTS)
        return DEFAULT_DRAFTS


async def conclude_skipped(gh: GitHubClient, repo: RepoRef, check_run_id: int,
                           base_sha: str) -> None:
    """Conclude a draft's check run ``skipped``, saying why and how to get a run.

    Raises:
        GitHubError: GitHub refused the update.
    """
    summary = (f"This pull request is a draft, and `.llmgate.yml` at the base commit "
               f"(`{base_sha[:7]}`) sets `settings.drafts: skip`, so no suite ran. Mark it "
               "ready for review to run them, or comment `/llmgate rerun` to run them now.")
    await gh.update_check_run(repo["owner"], repo["name"], check_run_id, {
        "status": "completed", "conclusion": "skipped",
        "output": {"title": SKIPPED_TITLE, "summary": summary}})
