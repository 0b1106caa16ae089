"""Calls to models: the litellm client, the direct client, cache, cost.

Face (``__all__``, worker/README.md's import rule 7): what other packages import of this
one, each name loaded from its module on first use.
"""

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:
    from worker.evals.llm import client as client
    from worker.evals.llm import local_embed as local_embed
    from worker.evals.llm.cache import ResponseCache as ResponseCache
    from worker.evals.llm.cli_cache import eval_context as eval_context
    from worker.evals.llm.client import count_tokens as count_tokens
    from worker.evals.llm.client import prepare as prepare
    from worker.evals.llm.client import refusal as refusal
    from worker.evals.llm.cost import Budget as Budget
    from worker.evals.llm.cost import BudgetExceeded as BudgetExceeded
    from worker.evals.llm.cost import call_cost_usd as call_cost_usd
    from worker.evals.llm.cost import max_tokens as max_tokens
    from worker.evals.llm.cost import stopping as stopping
    from worker.evals.llm.disk_cache import context_cache as context_cache
    from worker.evals.llm.endpoints import ENDPOINT_KEYS as ENDPOINT_KEYS
    from worker.evals.llm.endpoints import parse_endpoint as parse_endpoint
    from worker.evals.llm.guard import checking as checking
    from worker.evals.llm.provider import ModelCaller as ModelCaller

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submodules=['client', 'local_embed'],
    submod_attrs={
        'cache': ['ResponseCache'],
        'cli_cache': ['eval_context'],
        'client': ['count_tokens', 'prepare', 'refusal'],
        'cost': ['Budget', 'BudgetExceeded', 'call_cost_usd', 'max_tokens', 'stopping'],
        'disk_cache': ['context_cache'],
        'endpoints': ['ENDPOINT_KEYS', 'parse_endpoint'],
        'guard': ['checking'],
        'provider': ['ModelCaller'],
    },
)
