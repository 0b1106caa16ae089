"""A real git repository with two services, each with its own ``.llmgate.yml``.

Each service folder holds the echo suite of `worker_support` (four examples, ``echo.py``,
``evals/echo.jsonl``, all paths relative to the folder); the root ``.llmgate.yml`` lists both
(or, with ``listed=False``, there is no root config and both are discovered).
"""

from __future__ import annotations

from pathlib import Path

from tests.unit.worker_support import CONFIG, DATASET, ECHO, commit, git

SERVICES = ("services/a", "services/b")


def root_config(checks: str = "combined", extra: str = "") -> str:
    """The root ``.llmgate.yml``: no suites, ``settings.checks`` and the two services."""
    return (f"version: 1\nsettings:\n  checks: {checks}\nconfigs:\n  - services/a\n"
            f"  - services/b/.llmgate.yml\n{extra}")


#: 1-based line of an entry appended to `root_config`'s list.
EXTRA_ENTRY_LINE = root_config().count("\n") + 1


def service_files(folder: str, broken_word: str = "") -> dict[str, str | None]:
    """The files of one service; ``broken_word`` makes its target garble that example."""
    return {f"{folder}/.llmgate.yml": CONFIG,
            f"{folder}/echo.py": ECHO.replace('BROKEN = ""', f"BROKEN = {broken_word!r}"),
            f"{folder}/evals/echo.jsonl": DATASET}


def build_monorepo(dest: Path, *, checks: str = "combined", listed: bool = True) -> dict[str, str]:
    """Create the repository at ``dest``; return branch -> SHA.

    - ``main``: both services pass 4 of 4;
    - ``pr/a-drop``: ``bravo`` breaks in services/a (0.75: fails ``max_drop 0.05``), b passes;
    - ``pr/outside``: the root list gets ``- ../outside`` at line `EXTRA_ENTRY_LINE`;
    - ``pr/drop-b``: services/b leaves the root list and its ``.llmgate.yml`` is deleted;
    - ``pr/new-c``: a third service ``services/c`` is added, listed at head, 1 of 4 breaking.
    """
    dest.mkdir(parents=True)
    git(dest, "init", "-q", "-b", "main")
    files = {**service_files("services/a"), **service_files("services/b")}
    if listed:
        files[".llmgate.yml"] = root_config(checks)
    shas = {"main": commit(dest, "main", files, "two services")}
    new_c = {**service_files("services/c", "delta")}
    if listed:
        new_c[".llmgate.yml"] = root_config(checks, "  - services/c\n")
    branches: dict[str, dict[str, str | None]] = {
        "pr/a-drop": {"services/a/echo.py": service_files("services/a", "bravo")[
            "services/a/echo.py"]},
        "pr/outside": {".llmgate.yml": root_config(checks, "  - ../outside\n")},
        "pr/drop-b": {"services/b/.llmgate.yml": None,
                      **({".llmgate.yml": root_config(checks).replace(
                          "  - services/b/.llmgate.yml\n", "")} if listed else {})},
        "pr/new-c": new_c,
    }
    for branch, change in branches.items():
        shas[branch] = commit(dest, branch, change, branch)
    return shas
