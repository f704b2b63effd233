"""The command line the benchmark modules share: options from a dataclass of
settings, one size's failure kept to its own row, and the rows printed with their notes."""
from __future__ import annotations

import argparse
import dataclasses
import traceback
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from bench import deploy
from bench.report import Row, render, write_json

Settings = TypeVar('Settings')


def settings_parser(prog: str, doc: str, defaults: Any) -> argparse.ArgumentParser:
    """A parser with an option per field of the dataclass ``defaults`` (a flag for a
    boolean), described by the first paragraph of ``doc``."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.split('\n\n')[0])
    for field in dataclasses.fields(defaults):
        value = getattr(defaults, field.name)
        flag = f'--{field.name.replace("_", "-")}'
        if isinstance(value, bool):
            parser.add_argument(flag, action='store_true')
        else:
            parser.add_argument(flag, type=type(value), default=value)
    return parser


def settings_from(args: argparse.Namespace, defaults: Settings) -> Settings:
    """The dataclass of ``defaults``' type with the parsed values."""
    return type(defaults)(**{f.name: getattr(args, f.name)  # type: ignore[call-arg]
                             for f in dataclasses.fields(defaults)})  # type: ignore[arg-type]


def rows_per_size(label: str, sizes: Sequence[int],
                  run: Callable[[int], list[Row]]) -> list[Row]:
    """Every size's rows; a size that fails is a failed row named ``label: the run at
    this size`` (the others still run). A missing service stops every size."""
    rows: list[Row] = []
    for n in sizes:
        try:
            rows.extend(run(n))
        except deploy.ServiceMissing:
            raise
        except Exception as e:  # noqa: BLE001 - one size lost, not the run
            traceback.print_exc()
            rows.append(Row(f'{label}: the run at this size', n, None, target='completes',
                            passed=False, note=f'{type(e).__name__}: {str(e)[:300]}'))
    return rows


def notes(rows: Sequence[Row]) -> str:
    """The rows' notes, one line each."""
    return '\n'.join(f'- {r.name} (N={r.n}): {r.note}' for r in rows if r.note)


def finish(rows: Sequence[Row], json_path: str | None) -> int:
    """Print ``rows`` and their notes, write them as JSON when asked: the exit status
    (1 when a row failed)."""
    print(render(rows))
    print('\nnotes:')
    print(notes(rows))
    if json_path:
        write_json(rows, json_path)
    return 1 if any(r.passed is False for r in rows) else 0
