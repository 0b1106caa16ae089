"""A check asked before every provider call, which may forbid it.

The worker sets it around each try of a job (`worker.runtime.fence`): a try that lost its lease
to another try sends no more provider calls. What the check raises ends the call unsent and goes
up through the run; the worker's `LeaseLost` is a ``BaseException``, so the engine's handling of
a failed call (``except Exception``: an errored example) does not swallow it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar

#: Asked with what is about to be sent (e.g. ``chat openai/gpt-4o-mini``); may raise.
CallCheck = Callable[[str], Awaitable[None]]

_CHECK: ContextVar[CallCheck | None] = ContextVar("llmgate_call_check", default=None)


@contextlib.contextmanager
def checking(check: CallCheck) -> Iterator[None]:
    """Within the block (and the tasks created in it), ask ``check`` before every provider
    call (`before_call`)."""
    token = _CHECK.set(check)
    try:
        yield
    finally:
        _CHECK.reset(token)


async def before_call(what: str) -> None:
    """Ask the check set by `checking`, if any, before the provider call ``what`` is sent.

    Raises:
        BaseException: whatever the check raises (the worker's `LeaseLost`).
    """
    check = _CHECK.get()
    if check is not None:
        await check(what)
