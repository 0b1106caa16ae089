"""The settings of sharded gates (worker/gate/shards.py), read from the environment once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from worker.runtime.settings import whole_number

#: Defaults of ``LLMGATE_SHARD_EXAMPLES`` and ``LLMGATE_SHARD_OUTSTANDING``. Sharding is off
#: (0) until a shard lost with its worker is redone within the lease (it now waits for arq's own
#: in-progress timeout, or the gate times out).
DEFAULT_SHARD_EXAMPLES = 0
DEFAULT_SHARD_OUTSTANDING = 4
DEFAULT_SHARD_WAIT_S = 5

@dataclass(frozen=True)
class ShardSettings:
    """How a gate's examples are sharded, read from the environment once.

    Attributes:
        examples: examples per shard (``LLMGATE_SHARD_EXAMPLES``; 0, the default, turns
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

