"""The report's word on eval data the head's targets could see (issue 30).

Two notes, for ``llmgate run`` and the check run alike (`exposure_notes`, added by
`worker.pipeline.trees.gate_trees`):

- **No Landlock.** Command targets (and an agent's tool commands) run in a view of the checkout
  without the eval data (worker/evals/run/views.py), but only Landlock keeps them from opening
  the original checkout by its absolute path. On a machine without it (a kernel before 5.13,
  Landlock not in the ``lsm=`` boot list, or ``LLMGATE_SANDBOX=off``) the gate cannot vouch
  for the verdict, and says so in `NO_LANDLOCK_NOTE`. Saying nothing would be failing open.
- **A prompt that holds the answers.** A model target whose prompt file writes out the expected
  values of the examples it is scored on (worker/evals/config/prompt_leaks.py) is named with
  those examples: a warning, the verdict stands.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from worker.errors import ConfigError
from worker.evals.config import MIN_INLINED_CHARS, inlined_expected, load_prompt, load_suite_dataset
from worker.evals.run import runs_commands
from worker.evals.types import Config, ModelTarget, SuiteConfig
from worker.security import sandbox

#: The note of a gate whose command targets ran without Landlock; ``{why}`` says why.
NO_LANDLOCK_NOTE = ("targets could read the eval data ({why}): command targets ran in a copy "
                    "of the checkout without the datasets, labels and configs, but nothing kept "
                    "them from opening the originals by path; run the worker on Linux 5.13+ with "
                    "Landlock (LLMGATE_SANDBOX=required refuses to run targets without it)")
#: Example ids a prompt note names at most.
MAX_IDS = 5


def exposure_notes(configs: Sequence[Config], root: Path) -> list[str]:
    """Return the notes on eval data head's targets could see (module doc).

    Args:
        configs: the configs head's targets ran under (base's contract, head's own).
        root: head's checkout (its prompt files); datasets are read at each suite's
            ``contract_root``, else here.

    Returns:
        At most one no-Landlock note, then one note per suite whose prompt holds expected
        values; [] for none. Never raises (a file that cannot be read was reported by the run).
    """
    suites = [s for config in configs for s in config.suites]
    notes = []
    why = unconfined_reason()
    if why is not None and any(runs_commands(s.target) for s in suites):
        notes.append(NO_LANDLOCK_NOTE.format(why=why))
    leaked: dict[str, tuple[str, list[str]]] = {}
    for suite in suites:
        if isinstance(suite.target, ModelTarget):
            found = _inlined(suite, suite.target, root)
            known = leaked.setdefault(suite.name, (suite.target.prompt, []))[1]
            known += [i for i in found if i not in known]
    for name, (prompt, ids) in leaked.items():
        if ids:
            shown = ", ".join(ids[:MAX_IDS]) + (f" and {len(ids) - MAX_IDS} more"
                                                if len(ids) > MAX_IDS else "")
            notes.append(f"suite {name}: head's prompt {prompt} holds the expected answers of "
                         f"{len(ids)} example{'s' if len(ids) != 1 else ''} verbatim ({shown}; "
                         f"texts of {MIN_INLINED_CHARS}+ characters): a model given the answers "
                         "is not tested by them")
    return notes


def unconfined_reason() -> str | None:
    """Return why targets on this machine could read any file of the worker's user (no
    Landlock, or ``LLMGATE_SANDBOX=off``), or None when Landlock confines them (or a malformed
    sandbox setting keeps every target from starting)."""
    try:
        box = sandbox.current()
    except sandbox.SandboxError:
        return None
    if box.abi >= 1:
        return None
    return "LLMGATE_SANDBOX=off" if box.policy.mode == "off" else "no Landlock on this machine"


def _inlined(suite: SuiteConfig, target: ModelTarget, root: Path) -> list[str]:
    try:
        template = load_prompt(root, target.prompt)
        examples = load_suite_dataset(suite.contract_root or root, suite)
    except ConfigError:
        return []
    return inlined_expected(template, examples)
