"""Parse a suite's ``judge:`` rules: the labelled set its judge must keep agreeing with.

Format (read from the base commit only, like the gate rules; worker/pipeline/judge_trust.py)::

    judge: {labels: evals/judge-labels.jsonl, min_agreement: 0.8, max_drift: 0.05}

``labels`` (required) is the human labels file (worker/evals/config/labels.py);
``min_agreement`` and ``max_drift`` are fractions 0-1.
"""

from __future__ import annotations

from yaml.nodes import Node

from worker.evals.config.llm_suites import repo_path
from worker.evals.config.reader import Reader
from worker.evals.types import JudgeRules

JUDGE_RULE_KEYS = ("labels", "min_agreement", "max_drift")


def snapshot_path(labels: str) -> str:
    """The snapshot beside a labels file: ``e/labels.jsonl`` -> ``e/labels.snapshot.json``
    (worker/evals/run/judge_calibration.py writes and reads it)."""
    stem = labels[:-len(".jsonl")] if labels.endswith(".jsonl") else labels
    return f"{stem}.snapshot.json"


def judge_rules(reader: Reader, node: Node, what: str) -> JudgeRules:
    """Return the ``judge:`` mapping of a suite as `JudgeRules`.

    Raises:
        ConfigError: at the offending node: not a mapping, an unknown key, no ``labels``, or a
            bound that is not a fraction 0-1.
    """
    entries = reader.mapping(node, f"{what}: `judge`", JUDGE_RULE_KEYS)
    if "labels" not in entries:
        raise reader.error(node, f"{what}: `judge` needs `labels`: the JSONL of human labels "
                           "its judge is checked against")
    labels = repo_path(reader, entries["labels"][1], "`judge.labels`")
    bounds = {key: reader.fraction(entries[key][1], f"`judge.{key}`")
              for key in ("min_agreement", "max_drift") if key in entries}
    return JudgeRules(labels, bounds.get("min_agreement"), bounds.get("max_drift"),
                      int(node.start_mark.line) + 1)
