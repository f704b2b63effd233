"""bench.view's fill phase: where it stops, whatever the seeded cloud's random fill."""
import pytest

from bench.view import fill_phase_end


def test_a_seed_that_came_out_as_asked_fills_to_the_target():
    assert fill_phase_end(0.9, seeded=0.8992, margin=0.0008) == pytest.approx(0.9)


def test_a_seed_that_came_out_emptier_still_stops_at_the_target():
    assert fill_phase_end(0.9, seeded=0.8950, margin=0.0008) == pytest.approx(0.9)


def test_a_seed_that_came_out_past_the_target_still_places_the_margin():
    # 50,000 hosts seeded for 89.92% came out at 90.01%: stopping at 90% would end the
    # phase at its first check.
    assert fill_phase_end(0.9, seeded=0.9001, margin=0.0008) == pytest.approx(0.9009)


def test_a_start_given_on_the_command_line_past_the_target_ends_the_phase_at_once():
    # --start-fill sets no margin: the phase's first check finds the cloud full enough.
    assert fill_phase_end(0.9, seeded=0.93, margin=0.0) <= 0.93
