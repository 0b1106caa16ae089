"""Server-side SVG charts of the dashboard: a trend line with intervals, and a sparkline. Pure.

No script and no external resource: each chart is one ``<svg>`` element with presentation
attributes (it also stands alone, e.g. in a comment or an ``<img>``). Every text that reaches
the markup (commit ids and messages, labels, links) is escaped, so a label carrying markup or
any Unicode is shown as text. The same points give the same bytes (coordinates rounded to 0.1,
values to 4 significant digits).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

#: Colours: the line and points, the interval band and whiskers, the axes' text.
LINE, BAND, AXIS = "#0969da", "#0969da", "#57606a"


@dataclass(frozen=True)
class ChartPoint:
    """One point of a trend: ``label`` names it (a short commit id), ``value`` its value (None:
    no value, a gap), ``low``/``high`` its interval (both or neither), ``href`` where the point
    links (its run page or report; "" none), ``note`` more tooltip text (e.g. the date)."""

    label: str
    value: float | None
    low: float | None = None
    high: float | None = None
    href: str = ""
    note: str = ""


def number(value: float | None) -> str:
    """Return ``value`` as shown in charts and tables: 4 significant digits (below 1e-9: 0, a
    float's noise), "–" for none."""
    if value is None or not math.isfinite(value):
        return "–"
    return f"{round(value, 9):.4g}"


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _range(values: Sequence[float]) -> tuple[float, float]:
    """Return the y range of ``values`` with 5% headroom (a flat series gets ±0.5 or ±10%);
    never below 0 when no value is."""
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    pad = (abs(high) * 0.1 or 0.5) if high - low < 1e-12 else (high - low) * 0.05
    return (low - pad if low < 0 else max(low - pad, 0.0)), high + pad


class _Frame:
    """Maps point index and value to SVG coordinates inside the plot area."""

    def __init__(self, count: int, span: tuple[float, float], box: tuple[float, ...]) -> None:
        self.count, (self.low, self.high) = count, span
        self.left, self.top, self.right, self.bottom = box

    def x(self, index: int) -> float:
        if self.count <= 1:
            return (self.left + self.right) / 2
        return self.left + (self.right - self.left) * index / (self.count - 1)

    def y(self, value: float) -> float:
        share = (value - self.low) / (self.high - self.low)
        return self.bottom - (self.bottom - self.top) * share


def _path(runs: Sequence[Sequence[tuple[float, float]]], close: bool = False) -> str:
    """Return an SVG path's ``d`` drawing each run of (x, y) as a polyline (``close``: each
    closed, an area)."""
    end = "Z" if close else ""
    return "".join("M" + "L".join(f"{x:.1f} {y:.1f}" for x, y in run) + end
                   for run in runs if run)


def _runs(points: Sequence[ChartPoint], frame: _Frame,
          band: bool) -> list[list[tuple[float, float]]]:
    """Return the contiguous runs of points with a value (``band``: with an interval, as the
    closed outline high-then-low)."""
    runs: list[list[tuple[float, float]]] = [[]]
    lows: list[list[tuple[float, float]]] = [[]]
    for i, p in enumerate(points):
        value, low, high = _finite(p.value), _finite(p.low), _finite(p.high)
        if value is None or (band and (low is None or high is None)):
            runs.append([])
            lows.append([])
            continue
        runs[-1].append((frame.x(i), frame.y(high if band and high is not None else value)))
        if band and low is not None:
            lows[-1].append((frame.x(i), frame.y(low)))
    if band:
        return [run + lows[k][::-1] for k, run in enumerate(runs) if len(run) > 1]
    return [run for run in runs if run]


def _tooltip(p: ChartPoint) -> str:
    text = f"{p.label}: {number(p.value)}"
    if _finite(p.low) is not None and _finite(p.high) is not None:
        text += f" [{number(p.low)}, {number(p.high)}]"
    return text + (f" · {p.note}" if p.note else "")


def _marks(points: Sequence[ChartPoint], frame: _Frame) -> list[str]:
    """Return each valued point's whisker, dot and tooltip, linked when it has an ``href``."""
    out = []
    for i, p in enumerate(points):
        value = _finite(p.value)
        if value is None:
            continue
        x, y = frame.x(i), frame.y(value)
        low, high = _finite(p.low), _finite(p.high)
        whisker = (f'<path d="M{x:.1f} {frame.y(high):.1f}V{frame.y(low):.1f}"/>'
                   if low is not None and high is not None else "")
        mark = (f"<title>{escape(_tooltip(p))}</title>{whisker}"
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5"/>')
        out.append(f'<a href="{escape(p.href)}">{mark}</a>' if p.href else f"<g>{mark}</g>")
    return out


def trend_chart(points: Sequence[ChartPoint], *, title: str, width: int = 640,
                height: int = 150, span: tuple[float, float] | None = None) -> Markup:
    """Return an SVG trend of ``points`` (oldest first): the line, each interval as a band and
    a whisker, each point a dot with a ``<title>`` tooltip (label, value, interval, note) that
    links to its ``href``; the y axis's extremes and the first and last labels as text.

    ``width``/``height`` are the SVG's size in CSS pixels; ``span`` fixes the y axis (e.g.
    ``(0.0, 1.0)`` for a share), else it is the values' range with a margin. An empty
    ``points`` draws the frame.
    """
    values = [v for p in points for raw in (p.value, p.low, p.high)
              if (v := _finite(raw)) is not None]
    frame = _Frame(len(points), span if span is not None else _range(values),
                   (48.0, 22.0, width - 8.0, height - 20.0))
    label = escape(title)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{label}" '
             f'font-family="sans-serif" font-size="10">',
             f"<title>{label}</title>",
             f'<text x="48" y="12" font-size="12" font-weight="600">{label}</text>',
             f'<g fill="{AXIS}"><text x="44" y="{frame.top + 8:.1f}" text-anchor="end">'
             f'{escape(number(frame.high))}</text><text x="44" y="{frame.bottom:.1f}" '
             f'text-anchor="end">{escape(number(frame.low))}</text>']
    if points:
        parts.append(f'<text x="{frame.left:.1f}" y="{height - 5}">{escape(points[0].label)}'
                     f'</text><text x="{frame.right:.1f}" y="{height - 5}" text-anchor="end">'
                     f"{escape(points[-1].label)}</text>")
    parts.append(f'</g><path d="M{frame.left:.1f} {frame.bottom:.1f}H{frame.right:.1f}" '
                 f'stroke="{AXIS}" stroke-width="0.5"/>')
    band = _path(_runs(points, frame, band=True), close=True)
    if band:
        parts.append(f'<path d="{band}" fill="{BAND}" fill-opacity="0.12"/>')
    line = _path(_runs(points, frame, band=False))
    if line:
        parts.append(f'<path d="{line}" fill="none" stroke="{LINE}" stroke-width="1.5"/>')
    parts.append(f'<g fill="{LINE}" stroke="{BAND}" stroke-opacity="0.5">')
    parts += _marks(points, frame)
    parts.append("</g></svg>")
    return Markup("".join(parts))  # noqa: S704 - every text above is escaped


def sparkline(values: Sequence[float | None], *, title: str = "", width: int = 120,
              height: int = 24) -> Markup:
    """Return a small SVG line of ``values`` (oldest first; None is a gap) with the last value
    as a dot, in ``currentColor``; ``title`` (escaped) is its tooltip and accessible name."""
    finite = [(i, v) for i, raw in enumerate(values) if (v := _finite(raw)) is not None]
    frame = _Frame(len(values), _range([v for _, v in finite]),
                   (2.0, 2.0, width - 3.0, height - 2.0))
    label = escape(title)
    runs: list[list[tuple[float, float]]] = [[]]
    for i, raw in enumerate(values):
        value = _finite(raw)
        if value is None:
            runs.append([])
        else:
            runs[-1].append((frame.x(i), frame.y(value)))
    line = _path(runs)
    dot = (f'<circle cx="{frame.x(finite[-1][0]):.1f}" cy="{frame.y(finite[-1][1]):.1f}" '
           'r="2" fill="currentColor"/>' if finite else "")
    return Markup(  # noqa: S704 - the one text is escaped
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{label}"><title>{label}</title>'
        + (f'<path d="{line}" fill="none" stroke="currentColor" stroke-width="1.2"/>'
           if line else "") + dot + "</svg>")
