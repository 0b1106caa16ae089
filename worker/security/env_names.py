"""Which environment variable names a config may pass to its targets (pure, a leaf module).

The vocabulary of the scrubbed environment: worker/security/process.py builds a target's
environment from the names allowed here, worker/evals/config/load.py checks ``settings.env``
with them and worker/evals/llm/endpoints.py refuses an ``api_key_env`` that names one of
llmgate's own variables. It imports nothing of the package, so checking a name does not load
the sandbox.
"""

from __future__ import annotations

import re

#: Worker variables a target never sees, whatever ``settings.env`` says: the App's key and id,
#: the Redis URL and llmgate's own settings (see worker/runtime/settings.py).
FORBIDDEN_ENV_PREFIXES = ("GITHUB_", "LLMGATE_", "REDIS_", "ARQ_")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def is_env_name(name: str) -> bool:
    """Return whether ``name`` is a shell variable name: letters, digits and ``_``, not
    starting with a digit."""
    return bool(_ENV_NAME.match(name))


def is_allowed_env_name(name: str) -> bool:
    """Return whether a config may pass the environment variable ``name`` to its targets: a
    shell name (`is_env_name`) that does not start, in any case, with one of
    `FORBIDDEN_ENV_PREFIXES`."""
    return is_env_name(name) and not name.upper().startswith(FORBIDDEN_ENV_PREFIXES)
