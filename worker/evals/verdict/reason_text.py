"""What the verdict writes into rule reasons that the reports read back (pure, no imports).

worker/evals/verdict/decided.py appends `UNDECIDED_RULE` or `DECIDED_RULE` to the reason of a
failing rule when examples without an answer decide it, and worker/report/decision.py looks for
them to choose the run's Why; worker/evals/verdict/outcomes.py and the report's statistics table
(worker/report/stats_table.py) print p-values with `p_text`. Kept apart from the verdict's
computations so a renderer loads these words without the statistics and scorers.
"""

from __future__ import annotations

#: Appended to the reason of a failing rule the examples without an answer could make pass
#: (worker/report/decision.py names the run's headline as its Why then).
UNDECIDED_RULE = ("undecided: it fails on the answered examples, but the examples without an "
                  "answer could make it pass")
#: Appended to the reason of a failing rule the examples without an answer cannot undo (the
#: run's headline, which names the regressions too, is then its Why).
DECIDED_RULE = "it fails whatever the examples without an answer give"


def p_text(value: float) -> str:
    """Return a p-value (0-1) for a report: 3 decimals from 0.1, else 4 significant digits,
    as precise as the alphas it is compared with (``regression alpha 0.003906``), so a
    rounded p never reads on the other side of its alpha."""
    return f"{value:.3f}" if value >= 0.1 else f"{value:.4g}"
