"""Check out base and head of one gate request and run the eval suites on both trees."""

from __future__ import annotations

from contextlib import AsyncExitStack

from worker.checkout import GitError
from worker.evals.context import EvalContext
from worker.evals.types import ExecutionError, GateReport
from worker.gate_request import GateRequest
from worker.github.client import GitHubClient
from worker.metrics import record_call
from worker.pipeline import gate_trees
from worker.services import Services


async def evaluate(services: Services, gh: GitHubClient, request: GateRequest) -> GateReport:
    """Check out ``request``'s head and base and gate them (`worker.pipeline.gate_trees`).

    The installation token is given to git per command and added to the redactor.

    Raises:
        ExecutionError: git failed, or a SHA, URL or repository name was refused.
    """
    repo = request.repo
    token = await gh.installation_token()
    services.redactor.add(token)
    key = f"{repo['owner']}/{repo['name']}"
    try:
        async with AsyncExitStack() as stack:
            head_root = await stack.enter_async_context(
                services.checkouts.worktree(key, repo["clone_url"], request.head_sha, token))
            base_root = await stack.enter_async_context(
                services.checkouts.worktree(key, repo["clone_url"], request.base_sha, token))
            evals = EvalContext(redis=services.redis, namespace=key,  # cache per repository
                                on_call=record_call)  # provider calls, cache hits, USD
            return await gate_trees(head_root, base_root, head_sha=request.head_sha,
                                    base_sha=request.base_sha, evals=evals)
    except GitError as err:
        raise ExecutionError(f"git failed: {err}") from err
    except ValueError as err:  # a SHA, URL or repository name git must not be given
        raise ExecutionError(str(err)) from err
