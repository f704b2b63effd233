"""Benchmark rows: one table on stdout, the same rows in ``bench-results.json``."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass


@dataclass
class Row:
    """One measured quantity, side by side with Nova's where Nova has a counterpart.

    ``ours_ms``/``nova_ms`` are medians in milliseconds unless ``unit`` says
    otherwise (the JSON keeps the issue's field names for every row);
    ``target`` is the rule the row is held to, in words ("ratio >= 20",
    "<= 150 MB"); ``passed`` is None for rows measured for information only.
    """

    name: str
    n: int | None
    ours_ms: float | None
    nova_ms: float | None = None
    ratio: float | None = None
    target: str | None = None
    passed: bool | None = None
    unit: str = 'ms'
    note: str = ''

    def as_json(self) -> dict:
        row = asdict(self)
        for key in ('ours_ms', 'nova_ms', 'ratio'):
            if row[key] is not None:
                row[key] = round(row[key], 3)
        return row


def ratio_row(name: str, n: int | None, ours_ms: float, nova_ms: float,
              min_ratio: float = 20.0, note: str = '') -> Row:
    """A stage measured on both sides; passes when Nova is ``min_ratio`` times slower."""
    ratio = nova_ms / ours_ms if ours_ms > 0 else float('inf')
    return Row(name, n, ours_ms, nova_ms, ratio, f'ratio >= {min_ratio:g}',
               ratio >= min_ratio, note=note)


def _fmt(value: float | None) -> str:
    if value is None:
        return '-'
    if value >= 100:
        return f'{value:,.0f}'
    if value >= 10:
        return f'{value:.1f}'
    return f'{value:.3g}'


def render(rows: Sequence[Row]) -> str:
    header = ('stage', 'N', 'ours', 'nova', 'ratio', 'target', 'result')
    lines = [header]
    for r in rows:
        unit = '' if r.unit == 'ms' else f' {r.unit}'
        result = '-' if r.passed is None else ('PASS' if r.passed else 'FAIL')
        lines.append((r.name, '-' if r.n is None else f'{r.n:,}', _fmt(r.ours_ms) + unit,
                      _fmt(r.nova_ms) + (unit if r.nova_ms is not None else ''),
                      '-' if r.ratio is None else f'{r.ratio:.1f}x', r.target or '-', result))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for k, line in enumerate(lines):
        out.append('  '.join(cell.ljust(widths[i]) if i in (0, 5) else cell.rjust(widths[i])
                             for i, cell in enumerate(line)).rstrip())
        if k == 0:
            out.append('  '.join('-' * w for w in widths))
    return '\n'.join(out)


def write_json(rows: Sequence[Row], path: str) -> None:
    with open(path, 'w', encoding='utf-8') as f:
        json.dump([r.as_json() for r in rows], f, indent=2)
        f.write('\n')
