"""``llmgate run``'s options that choose what runs: ``--suite``, ``--smoke``, ``--samples``.

They become the run's `worker.evals.context.RunOverrides`, applied to head's and base's config
alike (worker/pipeline/overrides.py).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from worker.evals.context import RunOverrides

#: Largest ``--samples``: ``settings.repeats``' own limit (``MAX_REPEATS`` of
#: worker/evals/config/llm_suites.py, not imported here: ``--help`` stays fast; a test keeps
#: the two equal).
MAX_SAMPLES = 100


def _positive(text: str) -> int:
    """argparse type: a whole number of at least 1 (argparse exits 2 on anything else)."""
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return int(text)


def _samples(text: str) -> int:
    """argparse type: 1 to `MAX_SAMPLES` (``settings.repeats``' own limit)."""
    value = _positive(text)
    if value > MAX_SAMPLES:
        raise argparse.ArgumentTypeError(f"may be at most {MAX_SAMPLES}, got {value}")
    return value


def add_selection_options(run: argparse.ArgumentParser) -> None:
    """Add ``--suite`` (repeatable), ``--smoke N`` and ``--samples N`` to ``llmgate run``."""
    run.add_argument("--suite", action="append", default=[], metavar="NAME",
                     help="run only this suite (repeat for several); a name no config has is "
                          "a configuration error")
    run.add_argument("--smoke", type=_positive, metavar="N",
                     help="run only the first N examples of each suite, at base and head")
    run.add_argument("--samples", type=_samples, metavar="N",
                     help=f"runs of each example at base and head (settings.repeats; at most "
                          f"{MAX_SAMPLES}; more than 1 bypasses the response cache)")


def run_overrides(args: argparse.Namespace) -> RunOverrides:
    """Return the `RunOverrides` of ``llmgate run``'s parsed options."""
    from worker.evals.context import RunOverrides

    return RunOverrides(tuple(getattr(args, "suite", None) or ()),
                        getattr(args, "smoke", None), getattr(args, "samples", None))
