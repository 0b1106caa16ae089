"""The HTML report's charts as inline SVG (pure; drawn here, like worker/report/car_svg.py).

- `metric_bars`: per metric, base and head as bars on a 0-1 scale; where the paired statistics
  give a 95% confidence interval of the change, a whisker on the head bar spans base + the
  interval's bounds (head = base + change). Only metrics in 0-1 (rates) are drawn.
- `change_histogram`: how many examples' scores changed by how much, head minus base, in bins
  of 0.1 from -1 to 1 (an example's score: the mean of its assertions' scores over repeats).

Every number is formatted here and every label escaped, so no text of a pull request reaches
the markup as markup.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from worker.report.car_svg import COLOURS

#: Bins of the score-change histogram: width 0.1, centred on -1.0 ... 1.0.
BINS = 21


def metric_bars(rows: Sequence[tuple[str, float | None, float | None,
                                      tuple[float, float] | None]], title: str) -> str:
    """Return an SVG of ``(metric, base, head, (ci_low, ci_high) of head - base or None)``,
    values fractions 0-1 (others are left out); "" when nothing can be drawn."""
    drawn = [r for r in rows if all(v is None or 0.0 <= v <= 1.0 for v in r[1:3])
             and (r[1] is not None or r[2] is not None)]
    if not drawn:
        return ""
    group, bar, top, height = 90, 28, 30, 150
    width = 60 + group * len(drawn)
    parts = [_open(width, height + 70, title),
             f'<line x1="50" y1="{top + height}" x2="{width - 10}" y2="{top + height}" '
             'stroke="#24292f"/>']
    for tick in (0.0, 0.5, 1.0):
        y = top + height * (1 - tick)
        parts.append(f'<text x="44" y="{y + 3:.1f}" font-size="10" text-anchor="end">'
                     f"{tick:g}</text>")
    for i, (metric, base, head, ci) in enumerate(drawn):
        x = 60 + group * i
        for j, value in enumerate((base, head)):
            if value is not None:
                h = height * value
                parts.append(f'<rect x="{x + j * bar}" y="{top + height - h:.1f}" '
                             f'width="{bar - 4}" height="{h:.1f}" fill="{COLOURS[j]}"><title>'
                             f'{("base", "head")[j]} {value:.3f}</title></rect>')
        if ci is not None and base is not None:
            low, high = (min(max(base + b, 0.0), 1.0) for b in ci)
            cx = x + bar + (bar - 4) / 2
            parts.append(f'<line class="ci" x1="{cx:.1f}" x2="{cx:.1f}" '
                         f'y1="{top + height * (1 - low):.1f}" '
                         f'y2="{top + height * (1 - high):.1f}" '
                         'stroke="#24292f" stroke-width="2"/>')
        parts.append(f'<text x="{x + bar}" y="{top + height + 14}" font-size="10" '
                     f'text-anchor="middle">{html.escape(metric[:18])}</text>')
    parts.append(_legend(width))
    parts.append("</svg>")
    return "".join(parts)


def change_histogram(changes: Sequence[float], title: str) -> str:
    """Return an SVG histogram of per-example score changes (each -1 to 1); "" for none."""
    if not changes:
        return ""
    counts = [0] * BINS
    for change in changes:
        counts[min(max(round((change + 1.0) * 10), 0), BINS - 1)] += 1
    width, top, height, step = 60 + 14 * BINS, 30, 120, 14
    most = max(counts)
    parts = [_open(width, height + 60, title)]
    for i, count in enumerate(counts):
        h = height * count / most
        colour = "#1a7f37" if i > BINS // 2 else COLOURS[1] if i < BINS // 2 else COLOURS[0]
        parts.append(f'<rect x="{50 + i * step}" y="{top + height - h:.1f}" width="{step - 2}" '
                     f'height="{h:.1f}" fill="{colour}"><title>{(i - 10) / 10:+.1f}: '
                     f"{count} examples</title></rect>")
    for value, i in (("-1", 0), ("0", BINS // 2), ("+1", BINS - 1)):
        parts.append(f'<text x="{50 + i * step + step / 2 - 1:.1f}" y="{top + height + 14}" '
                     f'font-size="10" text-anchor="middle">{value}</text>')
    parts.append(f'<text x="{width / 2:.0f}" y="{top + height + 32}" font-size="10" '
                 'text-anchor="middle">score change, head - base (examples)</text></svg>')
    return "".join(parts)


def _open(width: int, height: int, title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}">'
            f'<text x="{width / 2:.0f}" y="16" text-anchor="middle" font-size="12">'
            f"{html.escape(title)}</text>")


def _legend(width: int) -> str:
    return "".join(f'<text x="{width - 10}" y="{30 + 12 * j}" font-size="10" text-anchor="end" '
                   f'fill="{COLOURS[j]}">{side}</text>' for j, side in enumerate(("base", "head")))
