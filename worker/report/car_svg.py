"""Draw CAR curves (MCA(c) over the consistency threshold c) as a small SVG (pure).

The picture is drawn here, not by a plotting library or service: two polylines on a unit
square with axes, ticks at 0, 0.5 and 1, and a legend. Every value is a float this module
formats itself and every label is escaped, so no text of a pull request reaches the markup.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

WIDTH, HEIGHT, MARGIN = 320, 220, 36
#: Colours of the curves, in the order given (base, head).
COLOURS = ("#6e7781", "#cf222e")
Curve = tuple[str, Sequence[tuple[float, float]]]


def _x(c: float) -> float:
    return MARGIN + c * (WIDTH - 2 * MARGIN)


def _y(m: float) -> float:
    return HEIGHT - MARGIN - m * (HEIGHT - 2 * MARGIN)


def car_svg(curves: Sequence[Curve], title: str = "CAR curve") -> str:
    """Return an SVG document (one line) of ``curves``: ``(label, [(c, MCA(c)), ...])`` with c
    and MCA fractions 0-1; at most two curves are coloured apart."""
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{html.escape(title)}">',
             f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
             f'<text x="{WIDTH / 2:.0f}" y="16" text-anchor="middle" font-size="12">'
             f"{html.escape(title)}</text>",
             f'<path d="M{_x(0):.1f},{_y(1):.1f} V{_y(0):.1f} H{_x(1):.1f}" fill="none" '
             'stroke="#24292f"/>']
    for tick in (0.0, 0.5, 1.0):
        parts.append(f'<text x="{_x(tick):.1f}" y="{HEIGHT - MARGIN + 14:.1f}" font-size="10" '
                     f'text-anchor="middle">{tick:g}</text>')
        parts.append(f'<text x="{MARGIN - 6:.1f}" y="{_y(tick) + 3:.1f}" font-size="10" '
                     f'text-anchor="end">{tick:g}</text>')
    parts.append(f'<text x="{WIDTH / 2:.0f}" y="{HEIGHT - 6}" font-size="10" '
                 'text-anchor="middle">consistency threshold c</text>')
    parts.append(f'<text x="10" y="{HEIGHT / 2:.0f}" font-size="10" text-anchor="middle" '
                 f'transform="rotate(-90 10 {HEIGHT / 2:.0f})">MCA(c)</text>')
    for index, (label, points) in enumerate(curves):
        colour = COLOURS[index % len(COLOURS)]
        path = " ".join(f"{_x(c):.1f},{_y(m):.1f}" for c, m in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                     'stroke-width="2"/>')
        y = MARGIN + 4 + 14 * index
        parts.append(f'<text x="{WIDTH - MARGIN:.0f}" y="{y}" font-size="10" '
                     f'text-anchor="end" fill="{colour}">{html.escape(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)
