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


def test_the_arbiters_cpu_a_claim_is_its_cores_over_the_claims_a_second():
    # Run 37's window: Placement 0.69 and PostgreSQL 0.26 of a core at 27.8 claims/s.
    assert (cpu.arbiter_per_claim({'placement': 0.69, 'postgresql': 0.26, 'service': 0.68},
                                  27.8)
            == 'Placement 24.8 ms, PostgreSQL 9.4 ms of CPU a claim')


def test_a_phase_that_made_no_claims_says_nothing_of_the_arbiters_cpu_a_claim():
    assert cpu.arbiter_per_claim({'placement': 0.1}, 0.0) == ''


def test_a_process_that_ends_between_two_samples_takes_nothing_from_its_kind():
    # The previous service's workers (pids 10, 11) stop as the window starts; the new one
    # (12) runs through it; PostgreSQL's connection 20 closes, 21 opens.
    before = {('service', 10, 1): 300.0, ('service', 11, 1): 280.0,
              ('service', 12, 5): 2.0, ('postgresql', 20, 1): 90.0}
    after = {('service', 12, 5): 14.0, ('postgresql', 21, 7): 3.0}
    assert cpu.seconds_between(before, after) == {'service': 12.0, 'postgresql': 3.0}
    assert cpu.used_between(before, after, 10.0) == {'postgresql': 0.3, 'service': 1.2}


def test_a_pid_taken_again_by_a_new_process_counts_from_zero():
    before = {('postgresql', 20, 1): 90.0}
    after = {('postgresql', 20, 9): 4.0}
    assert cpu.seconds_between(before, after) == {'postgresql': 4.0}


def test_a_sample_finds_this_process_as_the_bench_clients():
    own = [seconds for (kind, pid, _), seconds in cpu.sample().items()
           if kind == 'bench clients']
    assert len(own) == 1 and own[0] > 0
