"""Small, dependency-free SVG line charts (matplotlib is not a dependency).

Output is deterministic text (same data -> same bytes), so reports built from
the same run are byte-identical and DVC sees no change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Mapping, Sequence

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


@dataclass(frozen=True)
class Series:
    label: str
    points: Sequence[tuple[float, float]]  # (x, y); y None-free
    dashed: bool = False


def line_chart_svg(
    series: Sequence[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    hlines: Mapping[str, float] | None = None,
    width: int = 640,
    height: int = 320,
) -> str:
    """An SVG line chart of `series` with axes, ticks, a legend and optional labelled horizontal lines."""
    margin_left, margin_right, margin_top, margin_bottom = 56, 150, 32, 44
    plot_w = width - margin_left - margin_right
    plot_h = height - margin_top - margin_bottom
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points] + list((hlines or {}).values())
    if not xs:
        return _empty_chart(title, width, height)
    x_lo, x_hi = _padded(min(xs), max(xs))
    y_lo, y_hi = _padded(min(ys), max(ys))

    def px(x: float) -> float:
        return margin_left + (x - x_lo) / (x_hi - x_lo) * plot_w

    def py(y: float) -> float:
        return margin_top + plot_h - (y - y_lo) / (y_hi - y_lo) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
        f'<text x="{margin_left}" y="18" font-size="13" font-weight="bold">{escape(title)}</text>',
        f'<rect x="{margin_left}" y="{margin_top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>',
    ]
    for tick in _ticks(x_lo, x_hi):
        out.append(f'<line x1="{px(tick):.1f}" y1="{margin_top + plot_h}" x2="{px(tick):.1f}" y2="{margin_top + plot_h + 4}" stroke="#999"/>')
        out.append(f'<text x="{px(tick):.1f}" y="{margin_top + plot_h + 16}" text-anchor="middle">{_fmt(tick)}</text>')
    for tick in _ticks(y_lo, y_hi):
        out.append(f'<line x1="{margin_left}" y1="{py(tick):.1f}" x2="{margin_left + plot_w}" y2="{py(tick):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{margin_left - 6}" y="{py(tick) + 4:.1f}" text-anchor="end">{_fmt(tick)}</text>')
    out.append(f'<text x="{margin_left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle">{escape(x_label)}</text>')
    out.append(
        f'<text x="14" y="{margin_top + plot_h / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {margin_top + plot_h / 2:.1f})">{escape(y_label)}</text>'
    )
    for label, value in (hlines or {}).items():
        out.append(
            f'<line x1="{margin_left}" y1="{py(value):.1f}" x2="{margin_left + plot_w}" y2="{py(value):.1f}" '
            f'stroke="#555" stroke-dasharray="2,3"/>'
        )
        out.append(f'<text x="{margin_left + plot_w - 4}" y="{py(value) - 4:.1f}" text-anchor="end" fill="#555">{escape(label)}</text>')
    for index, s in enumerate(series):
        color = PALETTE[index % len(PALETTE)]
        dash = ' stroke-dasharray="6,4"' if s.dashed else ""
        points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s.points)
        out.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="1.8"{dash}/>')
        for x, y in s.points if len(s.points) <= 40 else ():
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{color}"/>')
        legend_y = margin_top + 12 + index * 16
        out.append(
            f'<line x1="{width - margin_right + 10}" y1="{legend_y - 4}" x2="{width - margin_right + 28}" '
            f'y2="{legend_y - 4}" stroke="{color}" stroke-width="2"{dash}/>'
        )
        out.append(f'<text x="{width - margin_right + 32}" y="{legend_y}">{escape(_short(s.label))}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _empty_chart(title: str, width: int, height: int) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">'
        f'<text x="20" y="30">{escape(title)}: no data</text></svg>\n'
    )


def _padded(lo: float, hi: float) -> tuple[float, float]:
    if math.isclose(lo, hi):
        return lo - 0.5, hi + 0.5
    pad = (hi - lo) * 0.05
    return lo - pad, hi + pad


def _ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    raw = (hi - lo) / target
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step) * step
    ticks = []
    value = first
    while value <= hi + 1e-12:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _fmt(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.3g}"


def _short(label: str, limit: int = 22) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"
