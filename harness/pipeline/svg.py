"""Small, dependency-free SVG charts (matplotlib is not a dependency): lines, small multiples, stacked bars.

Output is deterministic text (same data -> same bytes), so reports built from
the same run are byte-identical and DVC sees no change. The files are plain
SVG with no script and no external reference: `dvc plots show` shows them as
images, a browser opens them offline, MLflow shows them as artifacts. Each
chart's root and each small-multiple panel carry a ``data-chart`` /
``data-panel`` attribute so tests (and people reading the source) find them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from html import escape
from typing import Mapping, Sequence

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


@dataclass(frozen=True)
class Series:
    label: str
    points: Sequence[tuple[float, float]]  # (x, y); y None-free
    dashed: bool = False
    color: str | None = None  # None: the palette colour of its position
    width: float = 1.6  # stroke width; a wider series drawn first stays visible around a narrower one on top
    marker: str = "dot"  # at each point (charts with few points): one of MARKERS
    dash: str | None = None  # a stroke-dasharray of its own (e.g. "2,3"); None: "6,4" when dashed, else solid

    def __post_init__(self) -> None:
        if self.marker not in MARKERS:
            raise ValueError(f"Series {self.label!r}: marker {self.marker!r} is not one of {', '.join(MARKERS)}")

    @property
    def dasharray(self) -> str | None:
        return self.dash or ("6,4" if self.dashed else None)


# dot: a filled circle; ring / square: hollow (white inside), so a point drawn under them still shows; none: no marker
MARKERS = ("dot", "ring", "square", "none")


@dataclass(frozen=True)
class Panel:
    """One small multiple: its own series and title, axes shared with its siblings."""

    title: str
    series: Sequence[Series]
    key: str = ""  # data-panel attribute (e.g. the task type)


@dataclass(frozen=True)
class Box:
    x: float
    y: float
    w: float
    h: float


@dataclass(frozen=True)
class Scale:
    lo: float
    hi: float

    @classmethod
    def of(cls, values: Sequence[float], *, include_zero: bool = False) -> "Scale":
        values = list(values) + ([0.0] if include_zero else [])
        lo, hi = _padded(min(values), max(values))
        if include_zero:
            lo = 0.0 if min(values) >= 0 else lo
        return cls(lo, hi)

    def at(self, value: float, start: float, length: float) -> float:
        return start + (value - self.lo) / (self.hi - self.lo) * length


@dataclass
class _Svg:
    width: int
    height: int
    title: str
    chart: str
    parts: list[str] = field(default_factory=list)

    def text(self, x: float, y: float, content: str, **attrs: str | float) -> None:
        extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
        self.parts.append(f'<text x="{x:.1f}" y="{y:.1f}"{extra}>{escape(content)}</text>')

    def render(self) -> str:
        head = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
            f'viewBox="0 0 {self.width} {self.height}" font-family="sans-serif" font-size="11" data-chart="{escape(self.chart)}">',
            f"<title>{escape(self.title)}</title>",
            f'<rect x="0" y="0" width="{self.width}" height="{self.height}" fill="white"/>',
            f'<text x="12" y="18" font-size="13" font-weight="bold">{escape(self.title)}</text>',
        ]
        return "\n".join(head + self.parts + ["</svg>"]) + "\n"


def _axes(svg: _Svg, box: Box, xs: Scale, ys: Scale, *, x_label: str, y_label: str, x_ticks: bool = True,
          y_ticks: bool = True, integer_x: bool = False) -> None:
    svg.parts.append(f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" fill="none" stroke="#999"/>')
    bottom = box.y + box.h
    if x_ticks:
        for tick in _ticks(xs.lo, xs.hi, integer=integer_x):
            x = xs.at(tick, box.x, box.w)
            svg.parts.append(f'<line x1="{x:.1f}" y1="{bottom:.1f}" x2="{x:.1f}" y2="{bottom + 4:.1f}" stroke="#999"/>')
            svg.text(x, bottom + 15, _fmt(tick), text_anchor="middle")
    for tick in _ticks(ys.lo, ys.hi):
        y = ys.at(tick, bottom, -box.h)
        svg.parts.append(f'<line x1="{box.x:.1f}" y1="{y:.1f}" x2="{box.x + box.w:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        if y_ticks:
            svg.text(box.x - 5, y + 4, _fmt(tick), text_anchor="end")
    if x_label:
        svg.text(box.x + box.w / 2, bottom + 29, x_label, text_anchor="middle")
    if y_label:
        mid = box.y + box.h / 2
        svg.text(box.x - 38, mid, y_label, text_anchor="middle", transform=f"rotate(-90 {box.x - 38:.1f} {mid:.1f})")


def _hlines(svg: _Svg, box: Box, ys: Scale, hlines: Mapping[str, float], *, labels: bool = True) -> None:
    for label, value in hlines.items():
        y = ys.at(value, box.y + box.h, -box.h)
        svg.parts.append(f'<line x1="{box.x:.1f}" y1="{y:.1f}" x2="{box.x + box.w:.1f}" y2="{y:.1f}" '
                         f'stroke="#555" stroke-dasharray="2,3"/>')
        if labels:
            svg.text(box.x + box.w - 4, y - 4, label, text_anchor="end", fill="#555")


def _marker(x: float, y: float, kind: str, color: str, width: float) -> str:
    """One point's marker centred on (x, y), sized with the line's width."""
    size = 1.5 + width
    if kind == "dot":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{size:.1f}" fill="{color}"/>'
    if kind == "ring":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{size:.1f}" fill="white" stroke="{color}" stroke-width="1.4"/>'
    if kind == "square":
        return (f'<rect x="{x - size:.1f}" y="{y - size:.1f}" width="{2 * size:.1f}" height="{2 * size:.1f}" '
                f'fill="white" stroke="{color}" stroke-width="1.4"/>')
    return ""


def _lines(svg: _Svg, box: Box, xs: Scale, ys: Scale, series: Sequence[Series], *, dots: bool = True) -> None:
    """Each series as a polyline (``data-series``: its label) in the given order, so a later one is drawn on top,
    then its markers in a group of their own (``data-markers``) when `dots` and it has at most 40 points."""
    bottom = box.y + box.h
    for index, s in enumerate(series):
        color = s.color or PALETTE[index % len(PALETTE)]
        dash = f' stroke-dasharray="{s.dasharray}"' if s.dasharray else ""
        label = escape(s.label, quote=True)
        points = " ".join(f"{xs.at(x, box.x, box.w):.1f},{ys.at(y, bottom, -box.h):.1f}" for x, y in s.points)
        svg.parts.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="{s.width:g}"{dash} '
                         f'data-series="{label}"/>')
        if dots and s.marker != "none" and len(s.points) <= 40:
            marks = "".join(_marker(xs.at(x, box.x, box.w), ys.at(y, bottom, -box.h), s.marker, color, s.width)
                            for x, y in s.points)
            svg.parts.append(f'<g data-markers="{label}" data-marker="{s.marker}">{marks}</g>')


def _legend(svg: _Svg, x: float, y: float, entries: Sequence[tuple[str, str, bool] | Series], *, horizontal: bool = False,
            swatch: bool = False) -> None:
    """(label, colour, dashed) entries, or series drawn with their own width, dashes and marker, from (x, y), stacked
    or in one row; `swatch`: filled squares (bars)."""
    for entry in entries:
        if isinstance(entry, Series):
            label, color, width, dasharray, marker = entry.label, entry.color or PALETTE[0], entry.width, entry.dasharray, entry.marker
        else:
            label, color, dashed = entry
            width, dasharray, marker = 2.0, "4,3" if dashed else None, "none"
        dash = f' stroke-dasharray="{dasharray}"' if dasharray else ""
        if swatch:
            svg.parts.append(f'<rect x="{x + 4:.1f}" y="{y - 9:.1f}" width="10" height="10" fill="{color}"/>')
        else:
            svg.parts.append(f'<line x1="{x:.1f}" y1="{y - 4:.1f}" x2="{x + 18:.1f}" y2="{y - 4:.1f}" stroke="{color}" '
                             f'stroke-width="{width:g}"{dash}/>')
            if marker != "none":
                svg.parts.append(_marker(x + 9, y - 4, marker, color, width))
        svg.text(x + 22, y, label)
        if horizontal:
            x += 34 + 6.2 * len(label)
        else:
            y += 16


def line_chart_svg(
    series: Sequence[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    hlines: Mapping[str, float] | None = None,
    width: int = 640,
    height: int = 320,
    chart: str = "line",
    integer_x: bool = False,
) -> str:
    """An SVG line chart of `series` with axes, ticks, a legend and optional labelled horizontal lines
    (`integer_x`: x ticks on whole numbers only, e.g. epochs)."""
    xs_all = [x for s in series for x, _ in s.points]
    if not xs_all:
        return _empty_chart(title, width, height, chart)
    legend_w = min(230, 40 + 6.2 * max(len(s.label) for s in series))
    box = Box(56, 32, width - 56 - legend_w - 10, height - 32 - 44)
    xs = Scale.of(xs_all)
    ys = Scale.of([y for s in series for _, y in s.points] + list((hlines or {}).values()))
    svg = _Svg(width, height, title, chart)
    _axes(svg, box, xs, ys, x_label=x_label, y_label=y_label, integer_x=integer_x)
    _hlines(svg, box, ys, hlines or {})
    _lines(svg, box, xs, ys, series)
    _legend(svg, box.x + box.w + 12, box.y + 12,
            [replace(s, color=s.color or PALETTE[i % len(PALETTE)]) for i, s in enumerate(series)])
    return svg.render()


def small_multiples_svg(
    panels: Sequence[Panel],
    *,
    title: str,
    x_label: str,
    y_label: str,
    legend: Sequence[tuple[str, str, bool]] = (),
    hlines: Mapping[str, float] | None = None,
    columns: int = 4,
    panel_width: int = 230,
    panel_height: int = 150,
    chart: str = "small-multiples",
) -> str:
    """One panel per entry on a grid, all on the same x and y scales, with a shared legend above the grid."""
    xs_all = [x for p in panels for s in p.series for x, _ in s.points]
    if not xs_all:
        return _empty_chart(title, columns * panel_width, 80, chart)
    xs = Scale.of(xs_all)
    ys = Scale.of([y for p in panels for s in p.series for _, y in s.points] + list((hlines or {}).values()))
    columns = max(1, min(columns, len(panels)))
    rows = math.ceil(len(panels) / columns)
    left, top, gap_x, gap_y = 58, 50, 16, 52
    width = left + columns * panel_width + (columns - 1) * gap_x + 12
    height = top + rows * panel_height + (rows - 1) * gap_y + 40
    svg = _Svg(width, height, title, chart)
    entries = list(legend) + [(label, "#555", True) for label in (hlines or {})]
    if entries:
        _legend(svg, left, 38, entries, horizontal=True)
    for index, panel in enumerate(panels):
        row, col = divmod(index, columns)
        box = Box(left + col * (panel_width + gap_x), top + 14 + row * (panel_height + gap_y), panel_width, panel_height - 14)
        svg.parts.append(f'<g data-panel="{escape(panel.key or panel.title)}">')
        svg.text(box.x, box.y - 5, panel.title, font_weight="bold")
        last_row = row == rows - 1 or index + columns >= len(panels)
        _axes(svg, box, xs, ys, x_label=x_label if last_row else "", y_label=y_label if col == 0 else "",
              x_ticks=True, y_ticks=col == 0)
        _hlines(svg, box, ys, hlines or {}, labels=False)
        _lines(svg, box, xs, ys, panel.series, dots=False)
        svg.parts.append("</g>")
    return svg.render()


def stacked_bars_svg(
    categories: Sequence[str],
    stacks: Mapping[str, Sequence[float]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    note: str = "",
    width: int = 640,
    height: int = 320,
    chart: str = "stacked-bars",
) -> str:
    """One stacked bar per category; `stacks` maps a segment label to its value per category (same order),
    with the total written above each bar."""
    if not categories or not stacks:
        return _empty_chart(title, width, height, chart)
    totals = [sum(values[i] for values in stacks.values()) for i in range(len(categories))]
    legend_w = min(230, 40 + 6.2 * max(len(label) for label in stacks))
    box = Box(62, 32, width - 62 - legend_w - 10, height - 32 - 44 - (16 if note else 0))
    ys = Scale(0.0, _padded(0.0, max(totals) or 1.0)[1])
    svg = _Svg(width, height, title, chart)
    _axes(svg, box, Scale(0, 1), ys, x_label=x_label, y_label=y_label, x_ticks=False)
    slot = box.w / len(categories)
    bar_w = min(48.0, slot * 0.6)
    bottom = box.y + box.h
    for i, category in enumerate(categories):
        x = box.x + slot * i + (slot - bar_w) / 2
        base = 0.0
        for index, (label, values) in enumerate(stacks.items()):
            value = values[i]
            if value:
                y_top, y_bottom = ys.at(base + value, bottom, -box.h), ys.at(base, bottom, -box.h)
                svg.parts.append(f'<rect x="{x:.1f}" y="{y_top:.1f}" width="{bar_w:.1f}" height="{y_bottom - y_top:.1f}" '
                                 f'fill="{PALETTE[index % len(PALETTE)]}"><title>{escape(f"{category}: {label} {_fmt(value)}")}</title></rect>')
            base += value
        svg.text(x + bar_w / 2, ys.at(totals[i], bottom, -box.h) - 4, _fmt(totals[i]), text_anchor="middle")
        svg.text(x + bar_w / 2, bottom + 15, category, text_anchor="middle")
    _legend(svg, box.x + box.w + 12, box.y + 12, [(label, PALETTE[i % len(PALETTE)], False) for i, label in enumerate(stacks)],
            swatch=True)
    if note:
        svg.text(box.x, height - 8, note, fill="#555")
    return svg.render()


def _empty_chart(title: str, width: int, height: int, chart: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        f'font-size="12" data-chart="{escape(chart)}"><title>{escape(title)}</title>'
        f'<text x="20" y="30">{escape(title)}: no data</text></svg>\n'
    )


def _padded(lo: float, hi: float) -> tuple[float, float]:
    if math.isclose(lo, hi):
        return lo - 0.5, hi + 0.5
    pad = (hi - lo) * 0.05
    return lo - pad, hi + pad


def _ticks(lo: float, hi: float, target: int = 5, *, integer: bool = False) -> list[float]:
    raw = (hi - lo) / target
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    if integer:
        step = max(1.0, round(step))
    first = math.ceil(lo / step) * step
    ticks = []
    value = first
    while value <= hi + 1e-12:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _fmt(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.3g}"
