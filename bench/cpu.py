"""Where the machine's CPU went during a phase: per kind of process, from /proc.

Every piece of an end-to-end phase shares the same cores (Placement's gunicorn
workers, PostgreSQL, RabbitMQ, the service's workers, the benchmark's own
clients), so a throughput that stops growing is explained by who used the CPU.
Linux only; elsewhere the accounting is empty.
"""
from __future__ import annotations

import os
import pathlib
from collections import Counter

_TICKS = os.sysconf('SC_CLK_TCK') if hasattr(os, 'sysconf') else 100

#: (kind, what its command line contains), first match wins.
KINDS = (
    ('service', 'scheduler.cmd.service'),
    ('placement', 'gunicorn'),
    ('postgresql', 'postgres'),
    ('rabbitmq', 'beam.smp'),
)


def _kind(pid: str, own: str) -> str | None:
    if pid == own:
        return 'bench clients'
    try:
        cmdline = pathlib.Path(f'/proc/{pid}/cmdline').read_bytes().replace(b'\0', b' ')
    except OSError:
        return None
    text = cmdline.decode(errors='replace')
    for kind, marker in KINDS:
        if marker in text:
            return kind
    return None


def sample() -> Counter[str]:
    """CPU seconds used so far by each kind of process alive now (user + system)."""
    used: Counter[str] = Counter()
    own = str(os.getpid())
    proc = pathlib.Path('/proc')
    if not proc.is_dir():
        return used
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        kind = _kind(entry.name, own)
        if kind is None:
            continue
        try:
            stat = (entry / 'stat').read_text()
        except OSError:
            continue
        fields = stat.rsplit(')', 1)[1].split()
        used[kind] += (int(fields[11]) + int(fields[12])) / _TICKS
    return used


def used_between(before: Counter[str], after: Counter[str], seconds: float) -> dict[str, float]:
    """Cores used on average by each kind between two samples (processes that
    started in between count from zero; those that ended are not seen)."""
    if seconds <= 0:
        return {}
    return {kind: max(0.0, after[kind] - before.get(kind, 0.0)) / seconds
            for kind in sorted(after)}


def describe(cores: dict[str, float]) -> str:
    """'service 0.62, placement 0.71, …' (cores), largest first."""
    return ', '.join(f'{kind} {share:.2f}' for kind, share in
                     sorted(cores.items(), key=lambda kv: -kv[1]) if share >= 0.005)
