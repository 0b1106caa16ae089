"""The order-assistant agent of examples/support-agent as a git repository for the tests.

Branches: ``main`` (the example as shipped), ``pr/cancel`` (its variant ``pr-cancel``: the
prompt tells the agent to cancel an unhappy customer's order, so it calls the forbidden
``cancel_order`` on example ``late-c3``, dataset line 3) and ``pr/fix`` (on top of
``pr/cancel``: variant ``pr-fix``, which says never to cancel). The target reaches the fake
provider at ``url`` with the key named by `tests.e2e.model_support.KEY_ENV`; the fake answers
as ``recorded.json`` says (`recorded_rules`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.model_support import KEY_ENV
from tests.unit.worker_support import commit, git

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support-agent"
#: The dataset line of the example the regressing pull request breaks.
BROKEN_LINE = 3


def recorded_rules() -> dict[str, Any]:
    """Return the fake provider's setup of the example (its recorded answers)."""
    setup: dict[str, Any] = json.loads((EXAMPLE / "recorded.json").read_text())
    return setup


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*"))
            if p.is_file() and "variants" not in p.relative_to(folder).parts
            and p.name not in ("recorded.json", "README.md")}


def build_agent_repo(dest: Path, url: str) -> dict[str, str]:
    """Create the repository at ``dest`` (its parent must exist); return the SHA of each
    branch (``main``, ``pr/cancel``, ``pr/fix``)."""
    dest.mkdir()
    git(dest, "init", "-q", "-b", "main")
    files = _files(EXAMPLE)
    files[".llmgate.yml"] = files[".llmgate.yml"].replace(
        "      model: openai/gpt-4o-mini\n",
        f'      model: openai/gpt-4o-mini\n      api_base: "{url}"\n'
        f"      api_key_env: {KEY_ENV}\n")
    shas = {"main": commit(dest, "main", files)}
    shas["pr/cancel"] = commit(dest, "pr/cancel", _files(EXAMPLE / "variants" / "pr-cancel"))
    shas["pr/fix"] = commit(dest, "pr/fix", _files(EXAMPLE / "variants" / "pr-fix"),
                          start="pr/cancel")
    return shas
