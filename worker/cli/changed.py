"""The files a local change touches, for ``on_paths`` as the App applies it (issue 33).

On the App a suite whose ``on_paths`` no changed file matches is skipped
(worker/pipeline/on_paths.py); the changed files are the diff from the merge base of the base
and the head to the head (what a pull request's "Files changed" shows). ``llmgate run --base``
takes the same diff in the user's repository; for the working tree (no ``--head``) the diff
reaches the files as they are on disk: committed, staged and unstaged changes, and untracked
files that ``.gitignore`` does not ignore.
"""

from __future__ import annotations

from pathlib import Path

from worker.checkout import GitError, local_git, local_merge_base, resolve_ref

_DIFF = ("diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv")


async def changed_files(repo: Path, base_sha: str, head_sha: str) -> list[str] | None:
    """Return the repository paths (POSIX, sorted) that differ between the merge base of
    ``base_sha`` and the head and the head: commit ``head_sha``, or the working tree of
    ``repo`` when it is "". None when the two share no history (no merge base: every suite
    runs, as nothing says which files changed). A renamed file is listed under both names.

    Raises:
        ValueError: ``base_sha`` or ``head_sha`` is not a full SHA.
        GitError: git failed.
    """
    head = head_sha or await resolve_ref(repo, "HEAD")
    merge_base = await local_merge_base(repo, base_sha, head)
    if merge_base is None:
        return None
    paths = await _listed(repo, *_DIFF, merge_base, *([head_sha] if head_sha else []), "--")
    if not head_sha:  # new files of the working tree are changes too
        paths |= await _listed(repo, "ls-files", "-z", "--others", "--exclude-standard")
    return sorted(paths)


async def _listed(repo: Path, *args: str) -> set[str]:
    """The NUL-separated paths ``git args`` prints in ``repo``.

    Raises:
        GitError: git exited with a status other than 0.
    """
    code, out, err = await local_git(repo, *args)
    if code != 0:
        raise GitError(["git", *args], err or f"git {args[0]} exited {code}")
    return {path for path in out.split("\0") if path}
