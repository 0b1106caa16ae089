"""Count what GitHub (the fake's state) shows after a chaos run, per pull request's newest head.

- **lost**: a newest head without a completed ``llmgate`` check run (whatever its conclusion);
- **duplicated**: a head with more than one ``llmgate`` check run, or a pull request with more
  than one sticky comment (a bot's comment holding ``contract.COMMENT_MARKER``);
- **stuck**: an ``llmgate`` check run not completed (on any head), counted after a settle;
- **latency**: seconds from the first delivery of a newest head to the conclusion of the check
  run GitHub shows for it (the newest ``llmgate`` run of that head), from the fake's records;
- **writes**: mutating requests made with an installation token (what GitHub's secondary
  limits count), those on check runs of superseded heads, and the most in any 60 s.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from worker.contract import CHECK_NAME, COMMENT_MARKER

MUTATING = frozenset({"POST", "PATCH", "PUT", "DELETE"})


@dataclass(frozen=True)
class Delivery:
    """One delivery sent: PR, head SHA, when (Unix seconds), the status answered (0: none)."""

    pr: int
    head_sha: str
    sent_at: float
    status: int
    answer: str


@dataclass(frozen=True)
class Tally:
    """The counts of one chaos run (see the module docstring); lists name what they count."""

    lost: list[int]  # PR numbers
    duplicated_checks: dict[str, int]  # head SHA -> llmgate check runs on it (> 1)
    duplicated_comments: dict[int, int]  # PR -> sticky comments (> 1)
    stuck: list[int]  # check run ids not completed
    conclusions: dict[str, int]  # conclusion of each newest head's shown check run
    latencies_s: list[float]  # per concluded newest head, seconds
    writes: int
    superseded_writes: int
    max_writes_per_minute: int
    refused_deliveries: int
    violations: list[str]  # kinds

    @property
    def duplicated(self) -> int:
        """Heads with more than one check run plus PRs with more than one sticky comment."""
        return len(self.duplicated_checks) + len(self.duplicated_comments)

    @property
    def converged(self) -> bool:
        """Every newest head concluded and nothing in progress."""
        return not self.lost and not self.stuck

    def percentile_s(self, fraction: float) -> float:
        """Nearest-rank percentile of the latencies (``fraction`` 0-1), seconds; nan if none."""
        ordered = sorted(self.latencies_s)
        if not ordered:
            return math.nan
        return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]

    def line(self) -> str:
        """One line with every count, for a test's output and the report."""
        return (f"lost={len(self.lost)} duplicated={self.duplicated} "
                f"(checks {len(self.duplicated_checks)}, comments {len(self.duplicated_comments)})"
                f" stuck={len(self.stuck)} conclusions={dict(sorted(self.conclusions.items()))} "
                f"p50={self.percentile_s(0.5):.1f}s p99={self.percentile_s(0.99):.1f}s "
                f"writes={self.writes} superseded_writes={self.superseded_writes} "
                f"max_writes_per_minute={self.max_writes_per_minute} "
                f"refused_deliveries={self.refused_deliveries} violations={self.violations}")


def _concluded_at(run: dict[str, Any]) -> float | None:
    for entry in run["history"]:
        if isinstance(entry.get("body"), dict) and "conclusion" in entry["body"]:
            return float(entry["at"])
    return None


def _writes(state: dict[str, Any], superseded: set[int], newest: set[str]) -> tuple[int, int, int]:
    """(all installation writes, writes on superseded heads' check runs, most in 60 s)."""
    writes = [r for r in state["requests"] if r["method"] in MUTATING and r["auth"] == "token"]
    on_superseded = 0
    for r in writes:
        if r["operation"] == "checks/create":
            on_superseded += (r["body"] or {}).get("head_sha") not in newest
        elif r["operation"] == "checks/update":
            on_superseded += int(r["path"].split("?")[0].rsplit("/", 1)[-1]) in superseded
    times = sorted(r["at"] for r in writes)
    most, start = 0, 0
    for end, t in enumerate(times):
        while times[start] <= t - 60:
            start += 1
        most = max(most, end - start + 1)
    return len(writes), on_superseded, most


def tally(state: dict[str, Any], newest: dict[int, str], deliveries: list[Delivery]) -> Tally:
    """Count ``state`` (the fake GitHub's ``/_fake/state``) for ``newest`` (PR -> newest head
    SHA); ``deliveries`` give the delivery times."""
    runs = [r for r in state["check_runs"] if r["name"] == CHECK_NAME]
    by_head: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_head.setdefault(r["head_sha"], []).append(r)
    first_sent: dict[str, float] = {}
    for d in deliveries:
        first_sent.setdefault(d.head_sha, d.sent_at)
    lost, conclusions, latencies = [], Counter[str](), []
    for pr, sha in sorted(newest.items()):
        shown = max(by_head.get(sha, []), key=lambda r: r["id"], default=None)
        if shown is None or shown["status"] != "completed":
            lost.append(pr)
            continue
        conclusions[shown["conclusion"]] += 1
        done_at = _concluded_at(shown)
        if done_at is not None and sha in first_sent:
            latencies.append(done_at - first_sent[sha])
    stickies = Counter(c["issue_number"] for c in state["comments"]
                       if c["user"]["type"] == "Bot" and COMMENT_MARKER in c["body"])
    superseded = {r["id"] for r in runs if r["head_sha"] not in set(newest.values())}
    writes, on_superseded, most = _writes(state, superseded, set(newest.values()))
    return Tally(
        lost=lost,
        duplicated_checks={sha: len(rs) for sha, rs in by_head.items() if len(rs) > 1},
        duplicated_comments={pr: n for pr, n in stickies.items() if n > 1},
        stuck=[r["id"] for r in runs if r["status"] != "completed"],
        conclusions=dict(conclusions), latencies_s=latencies, writes=writes,
        superseded_writes=on_superseded, max_writes_per_minute=most,
        refused_deliveries=sum(not 200 <= d.status < 300 for d in deliveries),
        violations=[v["kind"] for v in state["violations"]])
