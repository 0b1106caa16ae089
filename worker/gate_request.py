"""What one gate run is asked to do: which repository, pull request, head and base."""

from __future__ import annotations

from dataclasses import dataclass

from worker.contract import RepoRef
from worker.trust import PullFacts


@dataclass(frozen=True)
class GateRequest:
    """One head SHA of one pull request to gate against one base SHA.

    Attributes:
        repo: the repository (owner, name, clone URL).
        pr_number: the pull request whose sticky comment is written.
        head_sha, base_sha: 40-hex commit SHAs.
        facts: who opened the PR and from which repository (trust); None to ask GitHub.
    """

    repo: RepoRef
    pr_number: int
    head_sha: str
    base_sha: str
    facts: PullFacts | None = None
