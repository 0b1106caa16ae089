"""Apply base's run settings to the head run: a pull request cannot bound or judge itself (pure).

The settings that bound a run or decide its verdict are read from the base commit's config,
like the gate rules (worker/evals/verdict/rules.py), so a pull request cannot give itself a budget
or a time limit that stops its own run before it shows a regression, skip retries, widen the error
rates the verdict tolerates, pass more of the worker's environment to its own commands, or call a
run undecided that base would decide:

- ``max_cost_usd``, ``max_duration`` and ``timeout``: the budget and time limits;
- ``concurrency``, ``retry`` and ``cache``: how hard the provider is pushed, and whether
  answers are reused;
- ``repeats`` and ``estimate_output_tokens``: how many draws decide a verdict, and the
  estimate that may refuse to start a run;
- ``max_provider_error_rate`` and ``max_judge_error_rate``: the verdict's tolerances;
- ``env``: the worker variables a command target may see;
- ``undecided``: what an undecidable run concludes.

Head keeps its ``judge`` and ``embedding`` here: they score head's own evaluation contract,
shown for information; the verdict scores head's target on base's contract with base's
judges and settings (worker/evals/verdict/contract.py). The settings read elsewhere from base only
(``base``, ``drafts``, ``on_paths_conclusion``, ``checks``, and ``statistics`` with
``sequential``, which worker/evals/verdict/rules.py takes from base with the rules) are left as
they are. A pull
request that needs a new value gets it once it is merged; until then the report names every
difference. Without a base config (a repository adopting llmgate, or ``llmgate run`` without
``--base``) head's settings apply, as its rules do.
"""

from __future__ import annotations

from dataclasses import replace

from worker.evals.types import Config, RetrySettings

#: `Settings` fields the head run takes from base, with the config key each is written as.
FROM_BASE = {"timeout_s": "timeout", "concurrency": "concurrency", "env": "env",
             "repeats": "repeats", "cache": "cache", "max_cost_usd": "max_cost_usd",
             "max_duration_s": "max_duration", "retry": "retry",
             "max_provider_error_rate": "max_provider_error_rate",
             "max_judge_error_rate": "max_judge_error_rate",
             "estimate_output_tokens": "estimate_output_tokens", "undecided": "undecided"}


def with_base_settings(base: Config | None, head: Config) -> tuple[Config, list[str]]:
    """Return head's config running under base's settings (`FROM_BASE`), and the notes.

    Args:
        base: the base commit's config, or None (no valid config at base: head's apply).
        head: the head commit's config.

    Returns:
        Head's config with base's values of the `FROM_BASE` fields, and one note naming
        every field head sets differently ("" list when none differs or base is None).
    """
    if base is None:
        return head, []
    values = {name: getattr(base.settings, name) for name in FROM_BASE}
    changed = [f"settings.{FROM_BASE[name]} {_show(getattr(head.settings, name))} -> "
               f"{_show(value)}" for name, value in values.items()
               if getattr(head.settings, name) != value]
    merged = replace(head, settings=replace(head.settings, **values))
    if not changed:
        return merged, []
    return merged, [f"head's run used base's settings, not its own ({'; '.join(changed)}, "
                    "head -> base): a pull request's own limits apply once it is merged"]


def _show(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, RetrySettings):
        return (f"{{max_retries: {value.max_retries}, backoff_base: {value.backoff_base_s:g}, "
                f"max_backoff: {value.max_backoff_s:g}}}")
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)
