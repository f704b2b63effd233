"""Where the machine's CPU went during a phase: per kind of process, from /proc.

Every piece of an end-to-end phase shares the same cores (Placement's gunicorn
workers, PostgreSQL, RabbitMQ, the service's workers, the benchmark's own
clients), so a throughput that stops growing is explained by who used the CPU.
Linux only; elsewhere the accounting is empty.

On one machine the ratio of a scheduler's throughput to Placement's own ceiling
measures how the cores were shared as much as the scheduler: every core the
service, RabbitMQ and the clients use is one Placement's ceiling had to itself.
:func:`split_machine` keeps them apart, as separate machines would: Placement's
workers and its database on one half of the CPUs, everything that asks them on
the other, for the ceilings and the service alike.
"""
from __future__ import annotations

import contextlib
import os
import pathlib
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

_TICKS = os.sysconf('SC_CLK_TCK') if hasattr(os, 'sysconf') else 100

#: (kind, what its command line contains), first match wins. bench.host_data's stand-in
#: compute API is Nova's side of the cloud, with the clients: its heartbeats re-serialise
#: a tenth of the services' records each second (0.16 of a core at 50,000, measured in a
#: bench.view --sources window), which no split left on Placement's half.
KINDS = (
    ('service', 'scheduler.cmd.service'),
    ('compute API stand-in', 'bench.host_data --serve-stand-in'),
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


def _processes() -> Iterator[tuple[str, pathlib.Path]]:
    """(kind, /proc entry) of every process of a kind alive now."""
    own = str(os.getpid())
    proc = pathlib.Path('/proc')
    if not proc.is_dir():
        return
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        kind = _kind(entry.name, own)
        if kind is not None:
            yield kind, entry


def process_seconds(pid: int | str) -> float:
    """CPU seconds process ``pid`` has used so far (user + system); OSError when it is
    gone."""
    return _stat(pid)[0]


def _stat(pid: int | str) -> tuple[float, int]:
    """(CPU seconds so far, start time in ticks since boot) of process ``pid``."""
    fields = pathlib.Path(f'/proc/{pid}/stat').read_text().rpartition(')')[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS, int(fields[19])


#: CPU seconds so far of each process alive at a sample, by (kind, pid, start time): a
#: process is told from another that later took its pid.
Sample = dict[tuple[str, int, int], float]


def sample() -> Sample:
    """CPU seconds used so far by each process of a kind alive now (user + system)."""
    used: Sample = {}
    for kind, entry in _processes():
        try:
            seconds, start = _stat(entry.name)
        except OSError:
            continue
        used[kind, int(entry.name), start] = seconds
    return used


def seconds_between(before: Sample, after: Sample) -> Counter[str]:
    """CPU seconds each kind used between two samples, process by process: one that
    started in between counts from zero; one that ended is not seen (what it used
    since ``before`` is lost), and takes nothing from the others of its kind. Summed by
    kind at each sample instead, a process that ended (a database connection closed,
    the previous phase's service stopping) took its whole life's CPU off its kind."""
    used: Counter[str] = Counter()
    for key, seconds in after.items():
        used[key[0]] += max(0.0, seconds - before.get(key, 0.0))
    return used


def used_between(before: Sample, after: Sample, seconds: float) -> dict[str, float]:
    """Cores used on average by each kind between two samples (:func:`seconds_between`)."""
    return cores_over(seconds_between(before, after), seconds)


def cores_over(used: Counter[str], seconds: float) -> dict[str, float]:
    """Cores used on average by each kind that used ``used`` CPU seconds in ``seconds``
    (the sum of several stretches' :func:`seconds_between`, say)."""
    if seconds <= 0:
        return {}
    return {kind: used[kind] / seconds for kind in sorted(used)}


@contextlib.contextmanager
def used() -> Iterator[dict[str, float]]:
    """Cores used on average by each kind during the block (:func:`used_between`),
    in the dict yielded, filled in when the block ends."""
    cores: dict[str, float] = {}
    before, started = sample(), time.monotonic()
    yield cores
    cores.update(used_between(before, sample(), time.monotonic() - started))


def describe(cores: dict[str, float]) -> str:
    """'service 0.62, placement 0.71, …' (cores), largest first."""
    return ', '.join(f'{kind} {share:.2f}' for kind, share in
                     sorted(cores.items(), key=lambda kv: -kv[1]) if share >= 0.005)


def arbiter_per_claim(cores: dict[str, float], claims_per_second: float) -> str:
    """'Placement 21.0 ms, PostgreSQL 5.9 ms of CPU a claim': the arbiter's cores over a
    phase's rate (its requests answered a second, a claim each while every request is
    placed; a phase whose requests also query Placement puts those queries' CPU in the
    figure too). Window and ceiling make the same PUTs, so where a window's figure is
    higher, something beside the claims used the arbiter's core (doc/performance.md,
    *Where the ninth machine's window loses*). Empty without a rate."""
    if claims_per_second <= 0:
        return ''
    return ', '.join(f'{name} {cores.get(kind, 0.0) * 1000 / claims_per_second:.1f} ms'
                     for kind, name in (('placement', 'Placement'),
                                        ('postgresql', 'PostgreSQL'))) + ' of CPU a claim'


#: The kinds that arbitrate (Placement and its database): one side of a split machine.
ARBITER = frozenset({'placement', 'postgresql'})


@dataclass(frozen=True)
class Split:
    """The CPUs of each side of a split machine."""

    arbiter: frozenset[int]
    callers: frozenset[int]

    def describe(self) -> str:
        return (f'Placement and PostgreSQL on CPU {_cpus(self.arbiter)}; the service, '
                f'RabbitMQ and the clients on CPU {_cpus(self.callers)}')


def _cpus(cpus: frozenset[int]) -> str:
    return ','.join(map(str, sorted(cpus)))


def _tasks() -> Iterator[tuple[str, int]]:
    """(kind, thread id) of every thread of every process of a kind."""
    for kind, entry in _processes():
        try:
            tids = [int(t.name) for t in (entry / 'task').iterdir()]
        except OSError:
            continue
        for tid in tids:
            yield kind, tid


def _set(tid: int, cpus: frozenset[int]) -> None:
    try:
        os.sched_setaffinity(tid, cpus)
    except ProcessLookupError:
        pass    # the thread ended since it was listed
    except PermissionError as e:
        raise RuntimeError(
            f'cannot set the CPU affinity of thread {tid} ({e}): splitting the machine '
            'needs the right to pin PostgreSQL\'s and RabbitMQ\'s processes (root)') from e


def pin(split: Split) -> None:
    """Every thread of every kind alive now on its side. Threads and processes they
    start later inherit it; a process started after this call (the service of the
    next phase) is pinned by the next call."""
    for kind, tid in _tasks():
        _set(tid, split.arbiter if kind in ARBITER else split.callers)


@contextlib.contextmanager
def split_machine() -> Iterator[Split]:
    """The machine split in two halves of the benchmark's CPUs for the block
    (:func:`pin` at the start of each phase); at the end every thread gets back the
    CPUs it had before, and one started meanwhile (a database backend, forked from
    a pinned server) every CPU of the machine: PostgreSQL and RabbitMQ outlive the
    benchmark."""
    cpus = sorted(os.sched_getaffinity(0))
    machine = frozenset(range(os.cpu_count() or len(cpus)))
    before: dict[int, frozenset[int]] = {}
    for _, tid in _tasks():
        with contextlib.suppress(ProcessLookupError):
            before[tid] = frozenset(os.sched_getaffinity(tid))
    if len(cpus) < 2:
        raise RuntimeError(f'splitting the machine needs 2 CPUs or more; this one has '
                           f'{len(cpus)}')
    half = len(cpus) // 2
    split = Split(arbiter=frozenset(cpus[:half]), callers=frozenset(cpus[half:]))
    try:
        pin(split)
        yield split
    finally:
        for _, tid in _tasks():
            _set(tid, before.get(tid, machine))
