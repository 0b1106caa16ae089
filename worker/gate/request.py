"""What one gate run is asked to do: which repository, pull request, head and base."""

from __future__ import annotations

from dataclasses import dataclass

from worker.contract import RepoRef
from worker.gate.trust import PullFacts


@dataclass(frozen=True)
class GateRequest:
    """One head SHA of one pull request to gate against one base SHA.

    Attributes:
        repo: the repository (owner, name, clone URL).
        pr_number: the pull request whose sticky comment is written.
        head_sha, base_sha: 40-hex commit SHAs.
        facts: who opened the PR and from which repository (trust); None to ask GitHub.
        no_cache: bypass the response cache (``/llmgate rerun --no-cache``: neither read nor
            written, like ``llmgate run --no-cache``).
        comment: write the PR's sticky comment (False for a merge group: no pull request).
        trusted: skip the trust check: a merge group's commit, which GitHub built in the base
            repository from pull requests a writer queued (each passed its own gate).
        external_id: the check run's ``external_id``; "" means ``pr:<pr_number>``.
        draft: the pull request is a draft (``settings.drafts: skip`` at base skips it).
        base_ref: the pull request's base branch name (``main``) when the run was asked for:
            the payload's ``pull_request.base.ref``, or GitHub's for a run that read the pull
            request (``/llmgate rerun``, an approval, a re-requested check run). A change of
            it supersedes the run (`worker.gate.supersede`); "" when unknown (a merge group: no
            pull request), and then only a change of head does.
    """

    repo: RepoRef
    pr_number: int
    head_sha: str
    base_sha: str
    facts: PullFacts | None = None
    no_cache: bool = False
    comment: bool = True
    trusted: bool = False
    external_id: str = ""
    draft: bool = False
    base_ref: str = ""
