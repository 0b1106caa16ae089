"""A run's calls stop once its work is no longer wanted (issue 31: `stopping`)."""

from __future__ import annotations

import asyncio

import pytest

from worker.evals.llm.cost import Budget, BudgetExceeded, stopping


async def test_a_task_made_while_stopping_refuses_its_calls_once_told() -> None:
    found: list[str] = []
    budget = Budget(None, None)

    async def work() -> str:
        budget.check()  # wanted: a call may be sent
        found.append("The pull request was closed.")
        with pytest.raises(BudgetExceeded, match="^cancelled: The pull request was closed.$"):
            budget.check()
        return str(budget.stopped)

    with stopping(lambda: found[0] if found else None):
        task = asyncio.ensure_future(work())
    assert await task == "cancelled: The pull request was closed."
    assert Budget(None, None).check() is None  # outside that task, no one asks
