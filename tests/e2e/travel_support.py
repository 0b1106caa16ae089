"""The travel-chat example (examples/travel-chat: multi-turn conversations, a command target) as
a git repository for the tests.

Branches: ``main`` (the example as shipped), ``pr/forget`` (variant ``pr-forget``: the bot stops
reading the earlier turns, so turn 2 of the conversations on dataset lines 1-3 fails) and
``pr/fix`` (on top of ``pr/forget``: variant ``pr-fix``, which reads them again).
"""

from __future__ import annotations

from pathlib import Path

from tests.unit.worker_support import commit, git

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "travel-chat"
#: (example id, dataset line) of the conversations ``pr/forget`` breaks at turn 2.
BROKEN = {("lisbon", 1), ("oslo", 2), ("rome", 3)}


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*"))
            if p.is_file() and "variants" not in p.relative_to(folder).parts
            and p.name != "README.md"}


def build_travel_repo(dest: Path) -> dict[str, str]:
    """Create the repository at ``dest`` (its parent must exist); return the SHA of each
    branch (``main``, ``pr/forget``, ``pr/fix``)."""
    dest.mkdir()
    git(dest, "init", "-q", "-b", "main")
    shas = {"main": commit(dest, "main", _files(EXAMPLE))}
    shas["pr/forget"] = commit(dest, "pr/forget", _files(EXAMPLE / "variants" / "pr-forget"))
    shas["pr/fix"] = commit(dest, "pr/fix", _files(EXAMPLE / "variants" / "pr-fix"),
                            start="pr/forget")
    return shas
