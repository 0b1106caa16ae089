"""Figures of the side-by-side run, the issue's table of ratios, and recorded peer figures.

A figure is a list of one value per repetition (median shown). A ratio is llmgate's median over
the peer's median; in brackets the range of the ratios of single repetitions, each of which ran
the tools next to each other in time (the machine's load drifts between repetitions, less
within one). A peer that is not installed is compared with its figures in `RECORDED`
(measured by this bench with ``--record`` on the machine and day they name), marked ``(r)``.
"""

from __future__ import annotations

import collections
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.peers.tree import TreeRun

#: Where ``--record`` writes the peers' measured figures, and where they are read from.
RECORDED = Path(__file__).with_name("recorded.json")
#: The figures kept per tool, in the order of the table of absolute figures.
METRICS = ("cold_wall_s", "cpu_s", "sampled_cpu_s", "peak_rss_mb", "processes", "warm_wall_s",
           "gate_wall_s", "gate_cpu_s", "gate_peak_rss_mb", "outlived", "linger_s")
#: The figures of the rate-limited row (bench/peers/limited.py), kept and recorded beside them.
LIMITED_METRICS = ("limited_wall_s", "limited_span_s", "limited_cpu_s", "limited_requests",
                   "limited_refused", "limited_admitted", "limited_answered", "limited_exit")
MB = 1_000_000

Figures = dict[str, list[float]]


@dataclass(frozen=True)
class Recorded:
    """Peer figures measured earlier: ``tools[name][metric]`` is a median; ``load`` says how
    busy the machine was (its load average at the start and the end)."""

    machine: str
    date: str
    load: str
    job: dict[str, float]
    tools: dict[str, dict[str, float | str]]


def combine(runs: Sequence[TreeRun]) -> TreeRun:
    """Return commands run one after another as one: walls, CPU and counts add up, memory is
    the highest peak, lingering the longest."""
    labels = sum((collections.Counter(dict(r.labels)) for r in runs), collections.Counter())
    return TreeRun(max(r.exit_code for r in runs), sum(r.wall_s for r in runs),
                   sum(r.cpu_s for r in runs), sum(r.sampled_cpu_s for r in runs),
                   max(r.peak_rss_bytes for r in runs), sum(r.processes for r in runs),
                   sum(r.outlived for r in runs), max(r.linger_s for r in runs),
                   sum(r.killed for r in runs), tuple(sorted(labels.items())))


def figures(cold: Sequence[TreeRun], warm: Sequence[TreeRun],
            gate: Sequence[TreeRun]) -> Figures:
    """Return one tool's figures from its runs of each kind (one per repetition; a gate of
    several commands already `combine`d). ``warm`` and ``gate`` may be empty."""
    every = [*cold, *warm, *gate]
    return {
        "cold_wall_s": [r.wall_s for r in cold], "cpu_s": [r.cpu_s for r in cold],
        "sampled_cpu_s": [r.sampled_cpu_s for r in cold],
        "peak_rss_mb": [r.peak_rss_bytes / MB for r in cold],
        "processes": [float(max((r.processes for r in cold), default=0))],
        "warm_wall_s": [r.wall_s for r in warm], "gate_wall_s": [r.wall_s for r in gate],
        "gate_cpu_s": [r.cpu_s for r in gate],
        "gate_peak_rss_mb": [r.peak_rss_bytes / MB for r in gate],
        "outlived": [float(max((r.outlived for r in every), default=0))],
        "linger_s": [max((r.linger_s for r in every), default=0.0)],
    }


def labels_text(runs: Sequence[TreeRun]) -> str:
    """Return the processes of the largest tree among ``runs``: ``"llmgate, 2 git"``."""
    widest = max(runs, key=lambda r: r.processes, default=None)
    if widest is None:
        return "–"
    return ", ".join(name if n == 1 else f"{n} {name}" for name, n in widest.labels)


def median(values: Sequence[float]) -> float | None:
    """Return the median of ``values``, or None for none."""
    return statistics.median(values) if values else None


def ratio(ours: Sequence[float], theirs: Sequence[float]) -> str:
    """Return ``"<median ratio> [<lowest>–<highest> per repetition]"``; ``theirs`` of one value
    (a recorded median) gives the ratio alone; ``"–"`` when either is missing."""
    mine, other = median(ours), median(theirs)
    if mine is None or not other:
        return "–"
    text = f"{mine / other:.2f}"
    if len(theirs) > 1 and len(ours) == len(theirs):
        each = [a / b for a, b in zip(ours, theirs, strict=True) if b]
        text += f" [{min(each):.2f}–{max(each):.2f}]"
    return text


def _over(values: Sequence[float], floor_s: float) -> str:
    mid = median(values)
    return "–" if mid is None else f"{mid / floor_s:.1f}"


def _row(label: str, metric: str, tools: Mapping[str, Figures], peers: Sequence[str],
         floor_s: float | None = None, absolute: str = "") -> str:
    ours = tools["llmgate"][metric]
    cells = [ratio(ours, tools[p][metric]) if p in tools else "–" for p in peers]
    if absolute:
        cells = [f"{c} ({_fmt(ours)} vs {_fmt(tools[p][metric])}{absolute})" if p in tools
                 and c != "–" else c for c, p in zip(cells, peers, strict=True)]
    floors = ("" if floor_s is None else " / ".join(
        _over(tools[n][metric], floor_s) if n in tools else "–" for n in ("llmgate", *peers)))
    return f"| {label} | " + " | ".join(cells) + f" | {floors} |"


def _fmt(values: Sequence[float]) -> str:
    mid = median(values)
    return "–" if mid is None else (f"{mid:.0f}" if mid >= 100 else f"{mid:.1f}")


def issue_table(tools: Mapping[str, Figures], peers: Sequence[str], floor_s: float,
                gate_floor_s: float, gate_calls: int) -> list[str]:
    """Return the lines of the issue's table: llmgate over each peer, and over the floor.

    ``tools`` maps a name (``llmgate`` and each peer with figures) to its `Figures`.
    """
    head = " | ".join(f"llmgate ÷ {p}" for p in peers)
    names = " / ".join(("llmgate", *peers))
    return [
        f"| row | {head} | ÷ floor ({names}) |", "|---" * (len(peers) + 2) + "|",
        _row("one side, cold, wall", "cold_wall_s", tools, peers, floor_s),
        _row("CPU (whole process tree)", "cpu_s", tools, peers, absolute=" s"),
        _row("memory (whole tree, peak of summed RSS)", "peak_rss_mb", tools, peers,
             absolute=" MB"),
        _row("warm re-run, wall", "warm_wall_s", tools, peers),
        _row(f"base + head gate ({gate_calls} calls), wall", "gate_wall_s", tools, peers,
             gate_floor_s),
    ]


def absolute_table(tools: Mapping[str, Figures], marks: Mapping[str, str]) -> list[str]:
    """Return a table of each tool's medians (``marks[name]`` follows its name)."""
    lines = ["| tool | " + " | ".join(METRICS) + " |", "|---" * (len(METRICS) + 1) + "|"]
    for name, figs in tools.items():
        lines.append(f"| {name}{marks.get(name, '')} | "
                     + " | ".join(_fmt(figs.get(m, [])) for m in METRICS) + " |")
    return lines


def load_recorded(path: Path | None = None) -> Recorded | None:
    """Return the recorded peer figures (default: `RECORDED`), or None when there are none."""
    path = path or RECORDED
    if not path.exists():
        return None
    return Recorded(**json.loads(path.read_text(encoding="utf-8")))


def recorded_figures(recorded: Recorded, name: str) -> Figures | None:
    """Return a peer's recorded medians as `Figures` of one value each, or None."""
    tool = recorded.tools.get(name)
    if tool is None:
        return None
    return {m: [float(tool[m])] for m in (*METRICS, *LIMITED_METRICS)
            if isinstance(tool.get(m), int | float)}


def save_recorded(recorded: Recorded, path: Path | None = None) -> None:
    """Write ``recorded`` as JSON (default: to `RECORDED`; sorted keys, one figure a line)."""
    text = json.dumps(asdict(recorded), indent=1, sort_keys=True) + "\n"
    (path or RECORDED).write_text(text, encoding="utf-8")


def medians(figs: Figures) -> dict[str, float]:
    """Return the median of each figure (figures without values are left out), rounded."""
    found = {m: median(v) for m, v in figs.items()}
    return {m: round(v, 3) for m, v in found.items() if v is not None}
