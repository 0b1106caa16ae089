"""The options of a custom Python assertion (``type: python``), checked at config time (pure).

The vocabulary of worker/evals/score/custom.py, which runs the assertion (in the sandbox for a
``function`` of the repository): the registry of assertion kinds (worker/evals/score/kinds.py)
checks a config's ``python`` assertions here, without loading what runs them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from worker.errors import ConfigError
from worker.evals.types import AssertionSpec

#: Entry-point group of shared assertion functions.
ENTRY_POINT_GROUP = "llmgate.assertions"
PYTHON_KEYS = ("function", "entry_point", "threshold")
#: ``path/to/file.py:function_name``, the form of a ``function`` option.
FUNCTION_REF = re.compile(r"(?P<path>[^:]+\.py):(?P<name>[A-Za-z_][A-Za-z0-9_]*)\Z")
Fail = Callable[[str], ConfigError]


def validate_python(spec: AssertionSpec, fail: Fail) -> None:
    """Check a ``python`` spec's options at config time.

    Raises:
        ConfigError: ``fail(message)`` for an unknown or malformed option.
    """
    p = spec.params
    for key in p:
        if key not in PYTHON_KEYS:
            raise fail(f"unknown option {key!r} (known options: {', '.join(PYTHON_KEYS)})")
    if ("function" in p) == ("entry_point" in p):
        raise fail("needs exactly one of `function: path/to/file.py:fn` or `entry_point: name` "
                   f"(group {ENTRY_POINT_GROUP})")
    if "function" in p:
        match = FUNCTION_REF.match(str(p["function"]))
        if match is None or match["path"].startswith("/") or ".." in match["path"].split("/"):
            raise fail("`function` must be `path/to/file.py:function_name`, a path inside the "
                       "repository")
    elif not isinstance(p["entry_point"], str) or not p["entry_point"]:
        raise fail("`entry_point` must be a name in the llmgate.assertions group")
    threshold = p.get("threshold", 0.5)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) \
            or not 0 <= threshold <= 1:
        raise fail("`threshold` must be a number from 0 to 1")
