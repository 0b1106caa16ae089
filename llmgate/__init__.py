"""llmgate's public Python API: gate LLM evals from Python as ``llmgate run`` does.

    import llmgate

    result = llmgate.run(".", base="main")
    if not result.passed:
        print(result.exit_code, result.headline, *result.why, sep="\\n")

The names below are the stable facade (docs/python-api.md). They change only with
`API_VERSION` and a CHANGELOG.md entry; everything under ``worker`` and ``app`` is internal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmgate.api import (
    EXIT_CONFIG_ERROR,
    EXIT_EXECUTION_ERROR,
    EXIT_GATE_FAILED,
    EXIT_PASS,
    EXIT_UNDECIDED,
    ExampleVerdict,
    Result,
    RuleVerdict,
    compare,
    load_config,
    run,
)
from worker.errors import ConfigError, ExecutionError
from worker.version import VERSION

if TYPE_CHECKING:
    from worker.evals.types import Config

#: The installed llmgate release (PEP 440), the one ``llmgate --version`` prints.
__version__ = VERSION
#: The version of this Python API: a new major number for a change that can break a caller
#: (a name removed or renamed, a field's meaning changed); minor for additions.
API_VERSION = "1.0"

__all__ = [
    "API_VERSION",
    "EXIT_CONFIG_ERROR",
    "EXIT_EXECUTION_ERROR",
    "EXIT_GATE_FAILED",
    "EXIT_PASS",
    "EXIT_UNDECIDED",
    "Config",
    "ConfigError",
    "ExampleVerdict",
    "ExecutionError",
    "Result",
    "RuleVerdict",
    "__version__",
    "compare",
    "load_config",
    "run",
]


def __getattr__(name: str) -> object:
    """``llmgate.Config``: the config type, imported on first use (the engine's types)."""
    if name == "Config":
        from worker.evals.types import Config

        return Config
    raise AttributeError(f"module 'llmgate' has no attribute {name!r}")
