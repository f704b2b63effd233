"""The provider view's curve as an SVG: providers -> throughput and p50, both modes.

``python -m bench.plot bench-results.json doc/provider-view-curve.svg`` reads the
rows bench.view wrote (``view: curve: ...`` and Placement's two ceilings) and
draws two panels with logarithmic axes. Plain SVG, no plotting library: the
benchmark's environment needs nothing more, and the file reads in a browser and
on a forge's Markdown page.
"""
from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from xml.sax.saxutils import escape

from bench.report import Row
from bench.view import QUERY_MODE, VIEW_MODE, curve_points

WIDTH, HEIGHT = 900, 380
PANEL_W, PANEL_H = 360, 260
MARGIN_LEFT, MARGIN_TOP = 70, 50
#: series -> (colour, dashed)
STYLE = {
    VIEW_MODE: ('#1b7837', False),
    QUERY_MODE: ('#b2182b', False),
    'PUT-only ceiling': ('#1b7837', True),
    'GET + PUT ceiling': ('#b2182b', True),
}


def _decades(low: float, high: float) -> list[float]:
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    return [10.0 ** e for e in range(first, last + 1)]


def _panel(x0: float, title: str, unit: str,
           series: dict[str, dict[int, float]]) -> list[str]:
    values = [v for points in series.values() for v in points.values() if v > 0]
    sizes = sorted({n for points in series.values() for n in points})
    if not values or not sizes:
        return []
    ys = _decades(min(values), max(values))
    xs = (min(sizes) / 1.5, max(sizes) * 1.5)

    def px(n: float) -> float:
        span = math.log10(xs[1]) - math.log10(xs[0])
        return x0 + (math.log10(n) - math.log10(xs[0])) / span * PANEL_W

    def py(v: float) -> float:
        span = math.log10(ys[-1]) - math.log10(ys[0])
        return MARGIN_TOP + PANEL_H - (math.log10(v) - math.log10(ys[0])) / span * PANEL_H

    out = [f'<text x="{x0 + PANEL_W / 2}" y="{MARGIN_TOP - 20}" text-anchor="middle" '
           f'font-weight="bold">{escape(title)}</text>',
           f'<rect x="{x0}" y="{MARGIN_TOP}" width="{PANEL_W}" height="{PANEL_H}" '
           f'fill="none" stroke="#999"/>']
    for y in ys:
        out.append(f'<line x1="{x0}" x2="{x0 + PANEL_W}" y1="{py(y):.1f}" y2="{py(y):.1f}" '
                   f'stroke="#eee"/>')
        out.append(f'<text x="{x0 - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
    for n in sizes:
        out.append(f'<text x="{px(n):.1f}" y="{MARGIN_TOP + PANEL_H + 16}" '
                   f'text-anchor="middle">{n:,}</text>')
    out.append(f'<text x="{x0 + PANEL_W / 2}" y="{MARGIN_TOP + PANEL_H + 34}" '
               f'text-anchor="middle">providers</text>')
    out.append(f'<text x="{x0 - 52}" y="{MARGIN_TOP + PANEL_H / 2}" text-anchor="middle" '
               f'transform="rotate(-90 {x0 - 52} {MARGIN_TOP + PANEL_H / 2})">'
               f'{escape(unit)}</text>')
    for name, points in series.items():
        colour, dashed = STYLE[name]
        coords = [(px(n), py(v)) for n, v in sorted(points.items()) if v > 0]
        dash = ' stroke-dasharray="6 4"' if dashed else ''
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="'
                   + ' '.join(f'{x:.1f},{y:.1f}' for x, y in coords) + '"/>')
        for x, y in coords:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"/>')
    return out


def svg(rows: Sequence[Row]) -> str:
    points = curve_points(list(rows))
    throughput = {name: points[key] for name, key in (
        (VIEW_MODE, f'{VIEW_MODE}, throughput'), (QUERY_MODE, f'{QUERY_MODE}, throughput'),
        ('PUT-only ceiling', 'PUT-only ceiling'), ('GET + PUT ceiling', 'GET + PUT ceiling'))
        if key in points}
    latency = {name: points[f'{name}, p50'] for name in (VIEW_MODE, QUERY_MODE)
               if f'{name}, p50' in points}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>']
    parts += _panel(MARGIN_LEFT, 'Throughput (4 workers, 8 clients)', 'decisions/s',
                    throughput)
    parts += _panel(MARGIN_LEFT + PANEL_W + 110, 'p50 latency of a request', 'ms', latency)
    legend_y = HEIGHT - 16
    x = MARGIN_LEFT
    for name, (colour, dashed) in STYLE.items():
        dash = ' stroke-dasharray="6 4"' if dashed else ''
        parts.append(f'<line x1="{x}" x2="{x + 24}" y1="{legend_y - 4}" y2="{legend_y - 4}" '
                     f'stroke="{colour}" stroke-width="2"{dash}/>')
        parts.append(f'<text x="{x + 30}" y="{legend_y}">{escape(name)}</text>')
        x += 40 + 7 * len(name)
    parts.append('</svg>')
    return '\n'.join(parts) + '\n'


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print('usage: python -m bench.plot ROWS.json OUT.svg', file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        rows = [Row(**{k: v for k, v in r.items() if k in Row.__dataclass_fields__})
                for r in json.load(f)]
    with open(argv[1], 'w') as f:
        f.write(svg(rows))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
