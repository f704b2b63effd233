"""bench.view's services. With --sources every phase's service reads a Nova cloud's
host-data sources in place of the hosts file, and takes calls only once its start-up
check was answered. Phase 7's service differs by the claims journal alone, and its row
holds each window to the ceiling measured beside it."""
import contextlib
from types import SimpleNamespace

import pytest

from bench import deploy, host_data, view

SOURCES = '[nova]\nendpoint = http://compute/p-x/v2.1\n[cell_database]\nconnections = c=u\n'


@pytest.fixture
def started(monkeypatch):
    """What each service was started with, and whose start-up check was awaited."""
    calls: list[dict] = []
    awaited: list[tuple] = []

    @contextlib.contextmanager
    def scheduler_service(workdir, **kwargs):
        calls.append(kwargs)
        yield SimpleNamespace(topic='scheduler-x'), object()

    monkeypatch.setattr(deploy, 'scheduler_service', scheduler_service)
    monkeypatch.setattr(host_data, 'await_startup_check',
                        lambda client, dep, nova, **kw: awaited.append((nova, kw)))
    monkeypatch.setattr('scheduler.rpc.client.SchedulerClient',
                        lambda transport, topic, timeout: SimpleNamespace(topic=topic))
    return calls, awaited


def _run(sources):
    run = object.__new__(view._Run)     # no deployment: only the service's start is looked at
    run.dep = SimpleNamespace(workdir='/w', url='http://placement',
                              hosts_file=lambda: '/w/hosts.json')
    run.opts = view.Options(workers=2, clients=3, nested=False)
    run.split = None
    run.sources = sources
    return run


def test_without_sources_the_service_reads_the_hosts_file(started):
    calls, awaited = started
    with _run(None).service('[scheduler]\nprovider_view = true\n'):
        pass
    assert calls[0]['hosts_file'] == '/w/hosts.json'
    assert '[nova]' not in calls[0]['extra_config']
    assert awaited == []


def test_with_sources_the_service_reads_them_and_no_hosts_file(started):
    calls, awaited = started
    nova = object()
    with _run(view._Sources(nova, SOURCES)).service('[scheduler]\nprovider_view = true\n'):
        pass
    assert calls[0]['hosts_file'] is None
    assert calls[0]['extra_config'].startswith('[scheduler]\nprovider_view = true\n')
    assert calls[0]['extra_config'].endswith(SOURCES)
    # Warmed up until the compute API answered that service's check, before any window.
    assert awaited == [(nova, {'clients': 3, 'nested': False})]


def test_the_claims_journal_baseline_keeps_the_sources(started):
    # Phase 7's service differs from phase 4's by the journal alone.
    calls, _ = started
    with _run(view._Sources(object(), SOURCES)).service(
            '[scheduler]\nprovider_view = true\n[claims_journal]\ndirectory =\n'):
        pass
    assert calls[0]['hosts_file'] is None
    assert SOURCES in calls[0]['extra_config']


def _phase(rate):
    return view._Phase(work=rate * 60.0, seconds=60.0, latencies=[0.25])


def _journal_run(monkeypatch, baseline_rate, ceiling_after):
    run = _run(None)
    run.n, run.rows = 50000, []
    ceilings = []
    monkeypatch.setattr(view._Run, 'view_window',
                        lambda self, client, label='', svc=None: (_phase(baseline_rate), {}, {}))

    def claim_ceiling(self, when=''):
        ceilings.append(when)
        return _phase(ceiling_after)
    monkeypatch.setattr(view._Run, 'claim_ceiling', claim_ceiling)
    monkeypatch.setattr(view, 'render', lambda rows: 'row\n')
    monkeypatch.setattr(view, '_view_config', lambda dep, opts: '')
    return run, ceilings


def test_the_journals_row_holds_each_window_to_the_ceiling_measured_beside_it(
        started, monkeypatch):
    # With the journal: 28.6 req/s against a ceiling of 32.3; without, minutes later,
    # 27.1 against 30.6: the same share of each ceiling, whatever the raw ratio says.
    run, ceilings = _journal_run(monkeypatch, baseline_rate=27.1, ceiling_after=30.6)
    view._journal_baseline(run, _phase(28.6), held_to=32.3)
    assert len(ceilings) == 1
    [row] = run.rows
    assert 'each held to its ceiling' in row.name
    assert row.ours_ms == pytest.approx((28.6 / 32.3) / (27.1 / 30.6))
    assert 'raw 28.6 / 27.1 req/s = 1.055x' in row.note


def test_without_a_ceiling_the_journals_row_is_the_raw_ratio_and_says_so(started, monkeypatch):
    run, ceilings = _journal_run(monkeypatch, baseline_rate=20.0, ceiling_after=30.0)
    view._journal_baseline(run, _phase(25.0))
    assert ceilings == []               # --view-only measures no ceiling
    [row] = run.rows
    assert row.ours_ms == pytest.approx(1.25)
    assert 'not held to a ceiling' in row.note
