"""Latency against throughput as one self-contained HTML page (inline SVG, no scripts).

Each series is a line through its steps, in load order, with the load
written next to each point and the numbers in a tooltip and in a table
under the chart. A latency budget, when given, is a dashed line.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from deploy._files import atomic_write_bytes

_WIDTH, _HEIGHT = 860, 480
_LEFT, _RIGHT, _TOP, _BOTTOM = 72, 190, 24, 56
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


@dataclass(frozen=True)
class Point:
    throughput: float  # items/s
    latency_ms: float
    label: str  # the load, e.g. "c8"


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[Point, ...]
    dashed: bool = False


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least `high`."""
    if high <= 0:
        return [0.0, 1.0]
    raw = high / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    ticks = [0.0]
    while ticks[-1] < high:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def _format(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:g}" if value == int(value) else f"{value:.3g}"


def render_svg(
    series: Sequence[Series], *, x_label: str, y_label: str, budget_ms: float | None = None
) -> str:
    points = [p for s in series for p in s.points]
    x_ticks = nice_ticks(max((p.throughput for p in points), default=1.0) * 1.05)
    y_high = max([p.latency_ms for p in points] + ([budget_ms] if budget_ms else []) + [0.0])
    y_ticks = nice_ticks(y_high * 1.05)
    plot_w = _WIDTH - _LEFT - _RIGHT
    plot_h = _HEIGHT - _TOP - _BOTTOM

    def x_at(value: float) -> float:
        return _LEFT + value / x_ticks[-1] * plot_w

    def y_at(value: float) -> float:
        return _TOP + plot_h - value / y_ticks[-1] * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_WIDTH} {_HEIGHT}" '
        f'width="{_WIDTH}" height="{_HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" fill="#fafafa" '
        'stroke="#999"/>',
    ]
    for tick in x_ticks:
        x = x_at(tick)
        out.append(
            f'<line x1="{x:.1f}" y1="{_TOP}" x2="{x:.1f}" y2="{_TOP + plot_h}" stroke="#e4e4e4"/>'
        )
        label_y = _TOP + plot_h + 16
        out.append(f'<text x="{x:.1f}" y="{label_y}" text-anchor="middle">{_format(tick)}</text>')
    for tick in y_ticks:
        y = y_at(tick)
        out.append(
            f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + plot_w}" y2="{y:.1f}" stroke="#e4e4e4"/>'
        )
        out.append(
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_format(tick)}</text>'
        )
    out.append(
        f'<text x="{_LEFT + plot_w / 2:.1f}" y="{_HEIGHT - 14}" text-anchor="middle">'
        f"{html.escape(x_label)}</text>"
    )
    out.append(
        f'<text transform="translate(18 {_TOP + plot_h / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{html.escape(y_label)}</text>'
    )
    if budget_ms is not None:
        y = y_at(budget_ms)
        out.append(
            f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + plot_w}" y2="{y:.1f}" '
            'stroke="#555" stroke-dasharray="6 4"/>'
        )
        out.append(
            f'<text x="{_LEFT + plot_w - 4}" y="{y - 5:.1f}" text-anchor="end" fill="#555">'
            f"budget {_format(budget_ms)} ms</text>"
        )
    for index, line in enumerate(series):
        colour = _COLOURS[index % len(_COLOURS)]
        dash = ' stroke-dasharray="4 3"' if line.dashed else ""
        coords = " ".join(f"{x_at(p.throughput):.1f},{y_at(p.latency_ms):.1f}" for p in line.points)
        out.append(
            f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'
        )
        for point in line.points:
            x, y = x_at(point.throughput), y_at(point.latency_ms)
            tip = (
                f"{line.name}, {point.label}: {_format(point.throughput)} items/s, "
                f"{point.latency_ms:.2f} ms"
            )
            out.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{colour}">'
                f"<title>{html.escape(tip)}</title></circle>"
            )
            out.append(
                f'<text x="{x + 6:.1f}" y="{y - 6:.1f}" fill="{colour}" font-size="10">'
                f"{html.escape(point.label)}</text>"
            )
        legend_y = _TOP + 14 + index * 18
        legend_x = _LEFT + plot_w + 14
        out.append(
            f'<line x1="{legend_x}" y1="{legend_y - 4}" x2="{legend_x + 22}" y2="{legend_y - 4}" '
            f'stroke="{colour}" stroke-width="3"{dash}/>'
        )
        out.append(f'<text x="{legend_x + 28}" y="{legend_y}">{html.escape(line.name[:24])}</text>')
    out.append("</svg>")
    return "\n".join(out)


def render_page(
    title: str,
    series: Sequence[Series],
    *,
    notes: Sequence[str] = (),
    table: Sequence[Sequence[str]] = (),
    budget_ms: float | None = None,
) -> str:
    svg = render_svg(
        series, x_label="throughput (inferences/s)", y_label="latency (ms)", budget_ms=budget_ms
    )
    rows = ""
    if table:
        head, *body = table
        rows = "<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in head) + "</tr>"
        for row in body:
            rows += "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
        rows += "</table>"
    items = "".join(f"<li>{html.escape(note)}</li>" for note in notes)
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>"
        "body{font-family:sans-serif;margin:24px;color:#222}"
        "table{border-collapse:collapse;margin-top:16px}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
        "th{background:#f0f0f0}</style></head><body>"
        f"<h2>{html.escape(title)}</h2>"
        + (f"<ul>{items}</ul>" if items else "")
        + svg
        + rows
        + "</body></html>\n"
    )


def write_page(path: Path, page: str) -> None:
    atomic_write_bytes(path, page.encode("utf-8"))
