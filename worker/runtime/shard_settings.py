"""The settings of sharded gates (worker/gate/shards.py), read from the environment once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from worker.runtime.settings import whole_number

#: Defaults of ``LLMGATE_SHARD_EXAMPLES``, ``LLMGATE_SHARD_OUTSTANDING`` and
#: ``LLMGATE_SHARD_WAIT_S``. 500: a suite's draw of up to 500 examples is answered in the gate's
#: own job exactly as without sharding; a larger one is spread over the workers in shards of 500
#: (a shard lost with its worker is redone within the job lease: tests/e2e/test_shard_e2e.py).
#: 5 s: a free worker claims a queued job within one poll (0.5 s); a shard still unclaimed after
#: 5 s finds every slot busy, and the gate's job answers it itself.
DEFAULT_SHARD_EXAMPLES = 500
DEFAULT_SHARD_OUTSTANDING = 4
DEFAULT_SHARD_WAIT_S = 5

@dataclass(frozen=True)
class ShardSettings:
    """How a gate's examples are sharded, read from the environment once.

    Attributes:
        examples: examples per shard (``LLMGATE_SHARD_EXAMPLES``, default 500; 0 turns
            sharding off); a suite's draw with at most this many examples is answered in the
            gate's own job.
        outstanding: shards one gate keeps queued or running at once
            (``LLMGATE_SHARD_OUTSTANDING``, >= 1).
        wait_s: seconds a shard may wait in the queue, taken by no worker, before the gate's
            job answers it itself (``LLMGATE_SHARD_WAIT_S``, >= 1).
    """

    examples: int = DEFAULT_SHARD_EXAMPLES
    outstanding: int = DEFAULT_SHARD_OUTSTANDING
    wait_s: int = DEFAULT_SHARD_WAIT_S

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ShardSettings:
        """Read the settings.

        Raises:
            SettingsError: a value is not a whole number (examples >= 0, outstanding >= 1,
                wait_s >= 1).
        """
        return cls(whole_number(environ, "LLMGATE_SHARD_EXAMPLES", DEFAULT_SHARD_EXAMPLES, 0),
                   whole_number(environ, "LLMGATE_SHARD_OUTSTANDING", DEFAULT_SHARD_OUTSTANDING, 1),
                   whole_number(environ, "LLMGATE_SHARD_WAIT_S", DEFAULT_SHARD_WAIT_S, 1))

