"""bench.view's window in slices between slices of the PUT-only ceiling: each slice held to
the ceiling measured seconds before and after it, so that a machine whose speed drifts
within a run reads the same share as a steady one."""
from __future__ import annotations

from collections import Counter
from itertools import pairwise
from types import SimpleNamespace

import pytest

from bench import view
from bench.e2e import _Phase
from bench.interleave import held_to_neighbours, merged


def test_a_steady_drift_cancels_out():
    # The ceiling climbs from 30 to 46 req/s over the run; the view keeps 0.85 of it.
    ceilings = [30.0, 34.0, 38.0, 42.0, 46.0]
    window = [0.85 * (a + b) / 2 for a, b in pairwise(ceilings)]
    held = held_to_neighbours(window, ceilings)
    assert held.share == pytest.approx(0.85)
    assert held.shares == pytest.approx((0.85,) * 4)
    assert held.ceiling == pytest.approx(38.0)


def test_a_window_held_to_the_ends_alone_misreads_the_same_drift():
    # What slicing mends: the same window as one, held to the first and last ceilings,
    # reads right only if the drift is steady over the whole run; here it sped up late.
    ceilings = [30.0, 31.0, 32.0, 40.0, 48.0]
    window = [0.85 * (a + b) / 2 for a, b in pairwise(ceilings)]
    ends = (sum(window) / len(window)) / ((ceilings[0] + ceilings[-1]) / 2)
    assert ends == pytest.approx(0.774, abs=0.001)
    assert held_to_neighbours(window, ceilings).share == pytest.approx(0.85)


def test_a_drift_within_a_slice_shows_as_the_spread_of_the_shares():
    held = held_to_neighbours([34.0, 34.0], [40.0, 40.0, 30.0])
    assert held.shares == pytest.approx((0.85, 34.0 / 35.0))
    assert held.share == pytest.approx(68.0 / 75.0)


@pytest.mark.parametrize('window, ceilings', [([], [40.0]), ([30.0, 30.0], [40.0, 40.0]),
                                              ([30.0], [40.0, 40.0, 40.0])])
def test_slices_that_do_not_interleave_are_refused(window, ceilings):
    with pytest.raises(ValueError, match='ceiling slices around them'):
        held_to_neighbours(window, ceilings)


def test_the_slices_together_are_one_window():
    one = _Phase(completed=10, work=10.5, errors=Counter(a=1), latencies=[0.1],
                 consumers=['c1'], seconds=15.0)
    two = _Phase(completed=20, work=19.5, errors=Counter(a=2, b=1), latencies=[0.2, 0.3],
                 consumers=['c2', 'c3'], seconds=15.0)
    whole = merged([one, two])
    assert (whole.completed, whole.work, whole.seconds) == (30, 30.0, 30.0)
    assert whole.rate == pytest.approx(1.0)
    assert whole.errors == Counter(a=3, b=1)
    assert whole.latencies == [0.1, 0.2, 0.3]
    assert whole.consumers == ['c1', 'c2', 'c3']


def _rate(rate: float, seconds: float = 15.0) -> _Phase:
    return _Phase(completed=int(rate * seconds), work=rate * seconds, seconds=seconds)


@pytest.fixture
def sliced_run(monkeypatch):
    """A run of 3 slices whose phases are played, not measured: what ran, in order."""
    run = object.__new__(view._Run)
    run.opts = view.Options(seconds=45.0, warmup=60.0, slices=3, slice_warmup=10.0)
    run.n, run.split, run.rows = 50000, object(), []
    order: list[tuple] = []
    ceilings = iter([40.0, 44.0, 36.0, 40.0])
    views = iter([35.7, 34.0, 32.3])

    def claim_ceiling(self, when='', *, seconds=None, warmup=None):
        order.append(('ceiling', when, seconds, warmup))
        return _rate(next(ceilings))

    def view_window(self, client, label='provider view', svc=None, *, slices=1, between=None):
        parts = []
        for _ in range(slices):
            order.append(('view',))
            parts.append(_rate(next(views)))
            between(parts[-1])
        return merged(parts), Counter({'PUT 200': 1533}), Counter()

    monkeypatch.setattr(view._Run, 'claim_ceiling', claim_ceiling)
    monkeypatch.setattr(view._Run, 'view_window', view_window)
    monkeypatch.setattr(view, 'render', lambda rows: 'row\n')
    return run, order


def test_the_window_s_slices_alternate_with_the_ceiling_s(sliced_run):
    run, order = sliced_run
    run.interleaved(client=object())
    assert [step[0] for step in order] == ['ceiling', 'view'] * 3 + ['ceiling']
    ceilings = [step for step in order if step[0] == 'ceiling']
    assert [step[1] for step in ceilings] == [f'slice {i} of 4' for i in (1, 2, 3, 4)]
    # Each ceiling slice as long as a window slice; only the first warms up in full.
    assert {step[2] for step in ceilings} == {15.0}
    assert [step[3] for step in ceilings] == [60.0, 10.0, 10.0, 10.0]


def test_each_slice_is_held_to_the_ceilings_beside_it(sliced_run):
    run, _ = sliced_run
    viewed, statuses, _, held_to = run.interleaved(client=object())
    [row] = run.rows
    assert row.name == 'view: throughput / PUT-only ceiling'
    # 35.7 of 42, 34.0 of 40, 32.3 of 38: 0.85 each, where the ends (40 and 40) say 0.85
    # only for the middle slice.
    assert row.ours_ms == pytest.approx(0.85)
    assert row.passed is True
    assert held_to == pytest.approx(40.0)
    assert viewed.rate == pytest.approx(34.0)
    assert '35.7/42.0 = 0.850x' in row.note and '32.3/38.0 = 0.850x' in row.note
    assert statuses == Counter({'PUT 200': 1533})


def test_a_window_below_the_share_of_its_slices_fails(sliced_run, monkeypatch):
    run, _ = sliced_run
    run.opts = view.Options(seconds=45.0, warmup=60.0, slices=3)
    views = iter([30.0, 30.0, 30.0])
    monkeypatch.setattr(view._Run, 'view_window', lambda self, client, label='', svc=None, *,
                        slices=1, between=None: _played(slices, between, views))
    run.interleaved(client=object())
    [row] = run.rows
    assert row.ours_ms == pytest.approx(90.0 / 120.0)
    assert row.passed is False


def _played(slices, between, rates):
    parts = []
    for _ in range(slices):
        parts.append(_rate(next(rates)))
        between(parts[-1])
    return merged(parts), Counter(), Counter()


def test_a_size_that_holds_no_target_keeps_the_share_as_information(sliced_run):
    run, _ = sliced_run
    run.n = 1000
    run.interleaved(client=object())
    [row] = run.rows
    assert row.passed is None and 'at 10,000 and 50,000' in row.target


def test_a_sliced_run_measures_no_ceiling_before_the_service_starts(monkeypatch):
    # With --slices, the arbiter-only run's ceilings are all the interleaved slices.
    calls = []
    monkeypatch.setattr(view, '_view_phases',
                        lambda run, claim_ceiling=None, *a, interleaved=False:
                        calls.append((claim_ceiling, interleaved)) or (_rate(30.0), 40.0))
    monkeypatch.setattr(view, '_journal_baseline', lambda run, viewed, held_to=None: None)
    monkeypatch.setattr(view._Run, 'claim_ceiling',
                        lambda self, when='', **kw: pytest.fail('a ceiling before'))
    _arbiter_only(monkeypatch, view.Options(arbiter_only=True, slices=4, start_fill=0.5))
    assert calls == [(None, True)]


def _arbiter_only(monkeypatch, opts):
    import contextlib

    @contextlib.contextmanager
    def seeded(*a, **kw):
        yield SimpleNamespace(seed_seconds=1.0, usage_consumers=0, cloud=None)

    monkeypatch.setattr(view.deploy, 'seeded_deployment', seeded)
    monkeypatch.setattr(view._Run, '__init__', _bare_init)
    monkeypatch.setattr(view, 'render', lambda rows: 'row\n')
    view.run(100, opts)


def _bare_init(self, dep, opts, split=None, margin=0.0, sources=None):
    self.dep, self.opts, self.split, self.n, self.rows = dep, opts, split, 100, []
    self.start_fill = {'MEMORY_MB': 0.5}
