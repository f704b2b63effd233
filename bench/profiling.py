"""Sampling a running service worker with py-spy, and the hotspots of the samples.

py-spy samples only the thread holding the GIL (``--gil``): the hotspots are
where the service spends CPU in Python, not where it waits for Placement or
the broker.

Optional: when py-spy is not installed the benchmarks run without a profile.
py-spy's ``raw`` output is one collapsed stack per line (``frame;frame;... count``,
root first, each frame ``function (file:line)``); :func:`hotspots` sums it by
function, as self time (the innermost frame) and as inclusive time (anywhere
in the stack), keeping only stacks that pass through the scheduler's request
path so that idle RPC and heartbeat threads do not count.
"""
from __future__ import annotations

import collections
import pathlib
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass

_FRAME_RE = re.compile(r'^(?P<func>.*?) \((?P<file>[^:()]+)(?::(?P<line>\d+))?\)$')
# Where a module lives says nothing about it: keep the path from the package on.
_PREFIX_RE = re.compile(r'^.*/(?:site-packages|python3\.\d+|main)/')
#: A stack belongs to a request when one of these frames is in it.
REQUEST_MARKERS = ('select_destinations',)


@dataclass
class Sampler:
    process: subprocess.Popen
    output: str

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start(pid: int, output: str, *, rate: int = 250) -> Sampler | None:
    """Start ``py-spy record`` on ``pid``; None when py-spy is not installed."""
    beside = pathlib.Path(sys.executable).parent / 'py-spy'   # a venv's, not on PATH
    exe = str(beside) if beside.exists() else shutil.which('py-spy')
    if exe is None:
        return None
    process = subprocess.Popen([exe, 'record', '--pid', str(pid), '--rate', str(rate),
                                '--format', 'raw', '--output', output, '--gil'],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return Sampler(process, output)


def _short(frame: str) -> str:
    match = _FRAME_RE.match(frame.strip())
    if not match:
        return frame.strip()
    path = _PREFIX_RE.sub('', match.group('file'))
    return f'{match.group("func")} ({path})'


def hotspots(raw_path: str, *, top: int = 15) -> dict[str, list[tuple[str, float]]]:
    """{'self': [(function, share of request samples)], 'inclusive': [...]} for the top ones."""
    self_counts: collections.Counter[str] = collections.Counter()
    incl_counts: collections.Counter[str] = collections.Counter()
    total = 0
    with open(raw_path, encoding='utf-8', errors='replace') as f:
        for line in f:
            stack, _, count_text = line.rstrip('\n').rpartition(' ')
            if not count_text.isdigit() or not any(m in stack for m in REQUEST_MARKERS):
                continue
            count = int(count_text)
            frames = [_short(fr) for fr in stack.split(';') if fr and
                      not fr.startswith('thread (') and not fr.startswith('process ')]
            if not frames:
                continue
            total += count
            self_counts[frames[-1]] += count
            for fr in set(frames):
                incl_counts[fr] += count
    if not total:
        return {'self': [], 'inclusive': [], 'samples': []}
    return {
        'self': [(f, c / total) for f, c in self_counts.most_common(top)],
        'inclusive': [(f, c / total) for f, c in incl_counts.most_common(top * 3)],
        'samples': [('request samples', float(total))],
    }


def format_hotspots(spots: dict[str, list[tuple[str, float]]]) -> str:
    lines = []
    for kind in ('self', 'inclusive'):
        lines.append(f'{kind} time (share of samples in select_destinations):')
        for func, share in spots.get(kind, []):
            lines.append(f'  {share * 100:5.1f}%  {func}')
    return '\n'.join(lines)
