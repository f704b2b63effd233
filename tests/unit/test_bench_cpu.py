"""bench.cpu: which side of a split machine each process of a phase is on."""
import subprocess
import sys

from bench import cpu


def _sleeping(*argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', *argv])


def test_the_stand_in_compute_api_is_counted_and_pinned_with_the_callers():
    stand_in = _sleeping('-m', 'bench.host_data', '--serve-stand-in', '/w/documents.json')
    other = _sleeping('unrelated')
    try:
        kinds = {entry.name: kind for kind, entry in cpu._processes()}
        assert kinds[str(stand_in.pid)] == 'compute API stand-in'
        assert str(other.pid) not in kinds
        # Pinned to the side of everything that asks Placement, not Placement's.
        assert 'compute API stand-in' not in cpu.ARBITER
    finally:
        stand_in.kill()
        other.kill()
        stand_in.wait()
        other.wait()
