"""Retrieval assertions: rank metrics of the `retrieved_ids` against `relevant_ids` (pure).

A RAG target reports the ids of the documents it retrieved, best first (``retrieved_ids`` in its
output JSON, worker/evals/score/outputs.py); an example names the documents that answer it
(``relevant_ids`` in the dataset: a list of ids, each of gain 1, or an object id -> gain, a
number >= 0, for graded relevance). Each assertion scores one example with one metric, a
fraction 0-1, so ``assertion.<type>.mean_score`` (alias ``<type>``, e.g. ``recall_at_k``) is
the suite's mean and base and head are compared example by example.

Definitions, as trec_eval computes them (``P_k``, ``recall_k``, ``recip_rank``, ``ndcg_cut_k``;
checked against pytrec_eval in the tests). Repeated ids count once, at their first rank; a
document is relevant when its gain is above 0; R is the set of relevant documents:

- ``recall_at_k``: |top k ∩ R| / |R|;
- ``precision_at_k``: |top k ∩ R| / k (fewer than k retrieved count as misses);
- ``hit_at_k``: 1 when any of the top k is relevant, else 0;
- ``mrr``: 1 / rank of the first relevant document (0 when none; within the top k when ``k``
  is set): the reciprocal rank, whose suite mean is the mean reciprocal rank;
- ``ndcg_at_k``: DCG@k / IDCG@k with DCG@k = sum over ranks i <= k of gain_i / log2(i + 1)
  (Järvelin and Kekäläinen, "Cumulated gain-based evaluation of IR techniques", ACM TOIS 20(4),
  2002, with trec_eval's linear gain) and IDCG@k the DCG@k of the relevant documents sorted by
  gain.

Options: ``k`` (an integer >= 1; required but for ``mrr``) and ``min`` (fraction 0-1): the score
that passes. By default an example passes only when retrieval is perfect at k: ``min`` is 1.0,
and for ``precision_at_k`` the best precision reachable, min(|R|, k) / k. A failure says what was
missing: the relevant ids not in the top k and the irrelevant ones that took their places.

Ids are compared after Unicode normalisation to NFC (Unicode Standard Annex #15) on both sides,
so ``café`` written with a precomposed ``é`` in the dataset matches ``café`` with a combining
accent in the target's output; the ids quoted in a failure are the normalised ones.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from worker.errors import ConfigError
from worker.evals.types import AssertionResult, AssertionSpec, Example

#: The retrieval assertion types, in the order the docs list them.
RETRIEVAL_TYPES: tuple[str, ...] = ("recall_at_k", "precision_at_k", "hit_at_k", "mrr",
                                    "ndcg_at_k")
#: Most ids quoted in a failure message.
MAX_IDS_SHOWN = 10
#: Largest ``k``.
MAX_K = 1000
_KEYS = ("k", "min")
#: Relevance judgments: document id -> gain (> 0 relevant).
Qrels = Mapping[str, float]


def validate_retrieval(spec: AssertionSpec, fail: Callable[[str], ConfigError]) -> None:
    """Check a retrieval assertion's options at config time.

    Raises:
        ConfigError: ``fail(message)`` for an unknown option, a missing or bad ``k``, or a
            ``min`` outside 0-1.
    """
    for key in spec.params:
        if key not in _KEYS:
            raise fail(f"unknown option {key!r} (known options: {', '.join(_KEYS)})")
    k = spec.params.get("k")
    if k is None and spec.type != "mrr":
        raise fail("needs `k`, the number of top results scored (e.g. `k: 5`)")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K):
        raise fail(f"`k` must be an integer from 1 to {MAX_K}")
    low = spec.params.get("min", 1.0)
    if isinstance(low, bool) or not isinstance(low, int | float) or not 0 <= low <= 1:
        raise fail("`min` must be a number from 0 to 1 (the score that passes)")


def normalise_id(doc_id: str) -> str:
    """Return a document id in Unicode normal form NFC (UAX #15), the form ids compare in."""
    return unicodedata.normalize("NFC", doc_id)


def normalise_qrels(qrels: Qrels) -> dict[str, float]:
    """Return ``qrels`` keyed by `normalise_id`; ids that become equal keep the highest gain."""
    out: dict[str, float] = {}
    for doc_id, gain in qrels.items():
        key = normalise_id(doc_id)
        out[key] = max(gain, out.get(key, gain))
    return out


def relevant_id_problem(value: Any) -> str | None:
    """Return what is wrong with the ids of ``relevant_ids`` (a list or object), else None.

    An id that is empty or blank names no document; two ids equal in NFC (`normalise_id`),
    such as a precomposed ``é`` and ``e`` + U+0301, are one document given twice.
    """
    ids = [str(i) for i in value] if isinstance(value, list | dict) else []
    seen: dict[str, str] = {}
    for doc_id in ids:
        if not doc_id.strip():
            return f"`relevant_ids` holds an empty id {doc_id!r}: each id names a document"
        key = normalise_id(doc_id)
        if key in seen:
            return (f"`relevant_ids` gives the id {key!r} twice ({seen[key]!r} and {doc_id!r} "
                    "are equal in Unicode NFC): give each document once")
        seen[key] = doc_id
    return None


def parse_relevant(value: Any) -> dict[str, float] | None:
    """Return the qrels of a dataset line's ``relevant_ids``, or None when it is malformed.

    A list of ids (strings or integers) gives each gain 1.0; an object maps ids to gains
    (numbers >= 0). Ids are normalised with `normalise_id`.
    """
    if isinstance(value, list):
        if all(isinstance(i, str | int) and not isinstance(i, bool) for i in value):
            return {normalise_id(str(i)): 1.0 for i in value}
        return None
    if isinstance(value, dict):
        gains = {str(i): g for i, g in value.items()}
        if all(isinstance(g, int | float) and not isinstance(g, bool) and math.isfinite(g)
               and g >= 0 for g in gains.values()):
            return normalise_qrels({i: float(g) for i, g in gains.items()})
    return None


def ranked(retrieved: Sequence[str], k: int | None) -> list[str]:
    """Return the top ``k`` distinct ids (all when ``k`` is None), each at its first rank."""
    top = list(dict.fromkeys(retrieved))
    return top if k is None else top[:k]


def recall_at_k(retrieved: Sequence[str], qrels: Qrels, k: int) -> float:
    """Return |top k ∩ R| / |R| (0.0 when nothing is relevant)."""
    relevant = {i for i, g in qrels.items() if g > 0}
    hits = sum(i in relevant for i in ranked(retrieved, k))
    return hits / len(relevant) if relevant else 0.0


def precision_at_k(retrieved: Sequence[str], qrels: Qrels, k: int) -> float:
    """Return |top k ∩ R| / k."""
    return sum(qrels.get(i, 0.0) > 0 for i in ranked(retrieved, k)) / k


def hit_at_k(retrieved: Sequence[str], qrels: Qrels, k: int) -> float:
    """Return 1.0 when any of the top k is relevant, else 0.0."""
    return float(any(qrels.get(i, 0.0) > 0 for i in ranked(retrieved, k)))


def reciprocal_rank(retrieved: Sequence[str], qrels: Qrels, k: int | None = None) -> float:
    """Return 1 / rank of the first relevant id within the top ``k`` (all when None), or 0.0."""
    for rank, i in enumerate(ranked(retrieved, k), start=1):
        if qrels.get(i, 0.0) > 0:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(retrieved: Sequence[str], qrels: Qrels, k: int) -> float:
    """Return DCG@k / IDCG@k with linear gains (module docstring); 0.0 when nothing is
    relevant."""
    dcg = _dcg([qrels.get(i, 0.0) for i in ranked(retrieved, k)])
    ideal = _dcg(sorted((g for g in qrels.values() if g > 0), reverse=True)[:k])
    return dcg / ideal if ideal > 0 else 0.0


def _dcg(gains: Sequence[float]) -> float:
    return math.fsum(g / math.log2(rank + 1) for rank, g in enumerate(gains, start=1))


def metric_value(kind: str, retrieved: Sequence[str], qrels: Qrels, k: int | None) -> float:
    """Return the value of retrieval metric ``kind`` (one of `RETRIEVAL_TYPES`).

    Raises:
        ValueError: ``kind`` is not a retrieval metric, or ``k`` is None where it is needed.
    """
    if kind == "mrr":
        return reciprocal_rank(retrieved, qrels, k)
    if k is None or kind not in _AT_K:
        raise ValueError(f"{kind} needs k")
    return _AT_K[kind](retrieved, qrels, k)


_AT_K: dict[str, Callable[[Sequence[str], Qrels, int], float]] = {
    "recall_at_k": recall_at_k, "precision_at_k": precision_at_k, "hit_at_k": hit_at_k,
    "ndcg_at_k": ndcg_at_k}


def check_retrieval(spec: AssertionSpec, retrieved: Sequence[str],
                    example: Example) -> AssertionResult:
    """Score one example's retrieval with a validated retrieval assertion.

    Returns:
        score: the metric value (0-1); passed when it is at least ``min`` (module docstring);
        details: ``value``, ``k``, ``min``, ``missing`` (relevant ids not in the top k) and
        ``irrelevant`` (ids in the top k that are not relevant). An example without
        ``relevant_ids``, or with none of gain above 0, fails with a message saying so.
        Ids on both sides are compared by `normalise_id`.
    """
    k: int | None = spec.params.get("k")
    name = spec.type.replace("_at_k", "") + (f"@{k}" if k is not None else "")
    if example.relevant_ids is None or not any(g > 0 for g in example.relevant_ids.values()):
        return AssertionResult(spec.type, False, 0.0, "the example has no `relevant_ids` "
                               "(the ids of the documents that answer it) to score against")
    qrels = normalise_qrels(example.relevant_ids)
    retrieved = [normalise_id(i) for i in retrieved]
    value = metric_value(spec.type, retrieved, qrels, k)
    low = _min(spec, qrels, k)
    top = ranked(retrieved, k)
    missing = [i for i, g in qrels.items() if g > 0 and i not in top]
    irrelevant = [i for i in top if qrels.get(i, 0.0) <= 0]
    details: dict[str, Any] = {"value": value, "k": k, "min": low, "missing": missing,
                               "irrelevant": irrelevant}
    passed = value >= low - 1e-9
    if passed:
        return AssertionResult(spec.type, True, value, details=details)
    return AssertionResult(spec.type, False, value, _message(name, value, low, k, missing,
                                                             irrelevant, top), details=details)


def _min(spec: AssertionSpec, qrels: Qrels, k: int | None) -> float:
    if "min" in spec.params:
        return float(spec.params["min"])
    if spec.type == "precision_at_k" and k is not None:
        return min(sum(g > 0 for g in qrels.values()), k) / k
    return 1.0


def _message(name: str, value: float, low: float, k: int | None, missing: list[str],
             irrelevant: list[str], top: list[str]) -> str:
    where = f"the top {k}" if k is not None else "the results"
    parts = [f"{name} {value:.2f} < {low:.2f}"]
    if missing:
        parts.append(f"relevant not in {where}: {_ids(missing)}")
    if irrelevant:
        parts.append(f"not relevant in {where}: {_ids(irrelevant)}")
    if not top:
        parts.append("the target reported no `retrieved_ids`")
    else:
        parts.append(f"retrieved: {_ids(top)}")
    return "; ".join(parts)


def _ids(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:MAX_IDS_SHOWN])
    more = len(ids) - MAX_IDS_SHOWN
    return f"{shown} (+{more} more)" if more > 0 else shown
