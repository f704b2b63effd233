"""The compute services' state between two reads of every row of the cells' tables.

With ``[cell_database] service_scan_interval`` (10 s by default), the read before a
request reads every row only that often. In between, a request reads again, by host,
the services held as disabled or down (so one enabled or back up counts at once), and
the hosts it is about to claim or offer as alternates are read by host and passed over
when their service is disabled or down now. No answer names a host whose service was
disabled or down when the answer was made, as with nova-scheduler's read of every
row per request. SQLite stands in for a cell database here; MariaDB and PostgreSQL in
tests/functional/test_cell_services.py.
"""
from __future__ import annotations

import datetime
import random
import sqlite3

import pytest

from scheduler.catalog import HostCatalog
from scheduler.catalog import nova_sync as nova_sync_mod
from scheduler.catalog.cell_db import CellDatabaseReader
from scheduler.catalog.cell_services import CellServicesReader
from scheduler.catalog.nova_api import NovaApiError, ServiceState
from scheduler.catalog.nova_sync import CheckedCellServices, NovaSync
from scheduler.pipeline.claim import SERVICE_GONE
from tests.builders import CELL, boot_spec, compute_filtered_manager, select, uuids
from tests.unit.test_cell_services import NOW, row, sqlite_cell


class Recording:
    """The cells' reader, every read it is asked for written down."""

    reads_by_host = True

    def __init__(self, reader: CellServicesReader):
        self.reader = reader
        self.calls: list[object] = []
        self.fail_by_host = False

    def read_services(self):
        self.calls.append('every row')
        return self.reader.read_services()

    def read_service_keys(self):
        self.calls.append('every row')
        return self.reader.read_service_keys()

    def states_of_keys(self, keys):
        return self.reader.states_of_keys(keys)

    def usual_again(self, hosts):
        self.calls.append(('usual again', sorted(hosts)))
        if self.fail_by_host:
            raise NovaApiError('cell database cell1: services: gone away')
        return self.reader.usual_again(hosts)

    def unusual_now(self, hosts):
        self.calls.append(('unusual now', sorted(hosts)))
        return self.reader.unusual_now(hosts)


class Cell:
    """One SQLite cell database, a NovaSync reading it, and the clocks of both."""

    def __init__(self, tmp_path, rows, *, scan_every: float = 10.0):
        self.path = tmp_path / 'cell1.db'
        url = sqlite_cell(self.path, rows)
        self.seconds = 1000.0
        self.catalog = HostCatalog(default_cell_uuid=CELL)
        self.source = Recording(CellServicesReader(
            [CellDatabaseReader(url)], down_time=60,
            clock=lambda: NOW + datetime.timedelta(seconds=self.seconds - 1000.0)))
        self.sync = NovaSync(self.catalog, NoApi(), interval=3600,  # type: ignore[arg-type]
                             service_state_max_age=0.0, services=self.source,
                             scan_every=scan_every, clock=lambda: self.seconds)

    def request(self) -> list[object]:
        """What the read before one request read, a second after the last."""
        self.seconds += 1.0
        del self.source.calls[:]
        self.sync.fresh_service_states()
        return list(self.source.calls)

    def sql(self, statement: str) -> None:
        with sqlite3.connect(self.path) as db:
            db.execute(statement)

    def state(self, host: str) -> tuple[bool, bool]:
        held = self.catalog.service_states()[host]
        return held.up, held.disabled


class NoApi:
    def read_services(self):
        raise AssertionError('the compute API was read')


def three_hosts():
    return [row(1, 'cn1'), row(2, 'cn2', disabled=True), row(3, 'cn3', heartbeat=90)]


def test_between_scans_a_request_reads_again_only_the_services_held_disabled_or_down(
        tmp_path):
    cell = Cell(tmp_path, three_hosts())

    reads = [cell.request() for _ in range(12)]     # a second apart

    assert reads[0] == ['every row']
    assert reads[1:11] == [[('usual again', ['cn2', 'cn3'])]] * 10
    assert reads[11] == ['every row']       # the scan is more than ten seconds old


def test_a_service_enabled_or_back_up_between_scans_counts_at_the_next_request(tmp_path):
    cell = Cell(tmp_path, three_hosts())
    cell.request()
    cell.sql('UPDATE services SET disabled = 0 WHERE host = \'cn2\'')
    cell.sql(f'UPDATE services SET last_seen_up = \'{NOW.isoformat(" ")}\' '
             f'WHERE host = \'cn3\'')

    cell.request()

    assert (cell.state('cn2'), cell.state('cn3')) == ((True, False), (True, False))
    # Usual now, they are not read by host again.
    assert cell.request() == []


def test_a_host_disabled_since_the_scan_is_found_before_it_is_answered_with(tmp_path):
    cell = Cell(tmp_path, three_hosts())
    cell.request()
    cell.sql('UPDATE services SET disabled = 1 WHERE host = \'cn1\'')

    assert cell.sync.unusable_hosts(['cn1', 'cn2']) == {'cn1', 'cn2'}
    assert cell.state('cn1') == (True, True)
    # Held as disabled now, it is read again before the next request.
    assert cell.request() == [('usual again', ['cn1', 'cn2', 'cn3'])]


def test_a_host_gone_silent_since_the_scan_is_found_before_it_is_answered_with(tmp_path):
    cell = Cell(tmp_path, three_hosts())
    cell.request()
    cell.seconds += 61      # cn1's heartbeat, 5 s old at the scan, is now past 60 s

    assert cell.sync.unusable_hosts(['cn1']) == {'cn1'}
    assert cell.state('cn1') == (False, False)


def test_with_a_scan_before_every_request_nothing_is_read_by_host(tmp_path):
    cell = Cell(tmp_path, three_hosts(), scan_every=0.0)

    assert [cell.request() for _ in range(3)] == [['every row']] * 3
    assert cell.sync.unusable_hosts(['cn1', 'cn2']) == set()
    assert cell.source.calls == ['every row']


def test_with_the_periodic_sync_only_nothing_is_read_per_request(tmp_path):
    """``[nova] service_state_max_age = -1``: no read before a request, nor by host."""
    cell = Cell(tmp_path, three_hosts())
    cell.sync = NovaSync(cell.catalog, NoApi(), interval=3600,  # type: ignore[arg-type]
                         service_state_max_age=None, services=cell.source, scan_every=10)

    assert cell.request() == []
    assert cell.sync.unusable_hosts(['cn1', 'cn2']) == set()
    assert cell.source.calls == []


def test_more_services_held_unusual_than_are_looked_up_one_by_one_are_read_whole(
        tmp_path, monkeypatch):
    monkeypatch.setattr(nova_sync_mod, 'MAX_HOSTS_READ_AGAIN', 1)
    cell = Cell(tmp_path, three_hosts())

    assert [cell.request() for _ in range(3)] == [['every row']] * 3


def test_a_twentieth_of_the_services_held_unusual_are_still_looked_up_one_by_one(
        tmp_path, monkeypatch):
    """At 50,000 services a cloud may well have a thousand disabled or down: each read of
    every row would cost many times their read by host."""
    monkeypatch.setattr(nova_sync_mod, 'MAX_HOSTS_READ_AGAIN', 1)
    monkeypatch.setattr(nova_sync_mod, 'READ_AGAIN_SHARE', 2 / 3)
    cell = Cell(tmp_path, three_hosts())
    cell.request()

    assert cell.request() == [('usual again', ['cn2', 'cn3'])]


def test_requests_queued_behind_a_read_by_host_begun_after_they_came_take_it(tmp_path):
    cell = Cell(tmp_path, three_hosts())
    cell.request()
    cell.seconds += 1.0
    del cell.source.calls[:]
    for _ in range(3):     # arrived together, read one after the other
        cell.sync.fresh_service_states()

    assert cell.source.calls == [('usual again', ['cn2', 'cn3'])]
    assert cell.request() == [('usual again', ['cn2', 'cn3'])]    # a second later


def test_a_request_leaves_unread_the_held_hosts_no_answer_of_it_can_be_on(tmp_path):
    # cn2 is disabled: its root carries the trait the request forbids
    # (scheduler/provider_view/reach.py; the manager's side in
    # tests/unit/test_held_services_out_of_reach.py).
    cell = Cell(tmp_path, three_hosts())
    cell.request()
    assert sorted(cell.sync.held_hosts()) == ['cn2', 'cn3']
    cell.seconds += 1.0
    del cell.source.calls[:]

    left = cell.sync.fresh_service_states(skip={'cn2', 'cn1'})

    assert left == {'cn2'}          # cn1 is not held: nothing of it to leave unread
    assert cell.source.calls == [('usual again', ['cn3'])]


def test_a_read_that_left_a_host_unread_serves_no_request_that_needs_it(tmp_path):
    cell = Cell(tmp_path, three_hosts())
    cell.request()
    cell.seconds += 1.0
    del cell.source.calls[:]

    # Three requests arrived together: the first may leave cn2 out, the second may not.
    cell.sync.fresh_service_states(skip={'cn2'})
    cell.sync.fresh_service_states()
    assert cell.sync.fresh_service_states(skip={'cn2'}) == {'cn2'}

    assert cell.source.calls == [('usual again', ['cn3']), ('usual again', ['cn2', 'cn3'])]


def cn2_left_unread_then_enabled(tmp_path) -> Cell:
    """A cell whose read before a request left the disabled cn2 unread, enabled since."""
    cell = Cell(tmp_path, three_hosts())
    cell.request()
    cell.seconds += 1.0
    cell.sync.fresh_service_states(skip={'cn2'})
    cell.sql('UPDATE services SET disabled = 0 WHERE host = \'cn2\'')
    del cell.source.calls[:]
    return cell


def test_a_host_left_unread_is_read_when_the_answer_can_be_on_it_after_all(tmp_path):
    cell = cn2_left_unread_then_enabled(tmp_path)

    cell.sync.read_again({'cn2'})

    assert cell.source.calls == [('usual again', ['cn2'])]
    assert cell.state('cn2') == (True, False)


def test_a_failed_read_of_a_host_left_unread_reads_every_row_instead(tmp_path):
    cell = cn2_left_unread_then_enabled(tmp_path)
    cell.source.fail_by_host = True

    cell.sync.read_again({'cn2'})

    assert cell.source.calls == [('usual again', ['cn2']), 'every row']
    assert cell.state('cn2') == (True, False)


def test_with_every_row_read_before_a_request_nothing_is_left_unread(tmp_path):
    cell = Cell(tmp_path, three_hosts(), scan_every=0.0)

    assert cell.sync.held_hosts() == ()
    assert cell.sync.fresh_service_states(skip={'cn2'}) == frozenset()
    assert cell.source.calls == ['every row']


def test_a_failed_read_by_host_reads_every_row_instead(tmp_path):
    cell = Cell(tmp_path, three_hosts())
    cell.request()
    cell.source.fail_by_host = True

    assert cell.request() == [('usual again', ['cn2', 'cn3']), 'every row']


def test_rows_found_wanting_are_not_read_by_host(tmp_path):
    """Once the compute API is read instead (another servicegroup driver), the rows'
    heartbeats mean nothing: every request reads the API as before."""
    url = sqlite_cell(tmp_path / 'cell1.db', three_hosts())
    checked = CheckedCellServices(CellServicesReader([CellDatabaseReader(url)], down_time=60,
                                                     clock=lambda: NOW),
                                  NoApi())  # type: ignore[arg-type]
    assert checked.reads_by_host
    checked.from_api = True
    sync = NovaSync(HostCatalog(default_cell_uuid=CELL), NoApi(),  # type: ignore[arg-type]
                    interval=3600, service_state_max_age=0.0, services=checked, scan_every=10)

    assert not checked.reads_by_host
    assert sync.unusable_hosts(['cn1']) == set()


@pytest.mark.parametrize('chunk', [250, 3])
def test_the_reads_by_host_find_what_a_read_of_every_row_finds(tmp_path, monkeypatch, chunk):
    """Random rows and hosts: of the hosts asked, the usual services are exactly those
    a whole read finds up and enabled with no reason, the unusual ones the others
    (the hosts asked in one statement, or a few at a time)."""
    from scheduler.catalog import cell_services

    monkeypatch.setattr(cell_services, 'BY_HOST_CHUNK', chunk)
    rng = random.Random(11)
    for case in range(30):
        rows = [(i, f'cn{i}', 'nova-compute', rng.random() < 0.2,
                 rng.choice([None, None, 'maintenance']), rng.random() < 0.1,
                 None if rng.random() < 0.1 else
                 (NOW - datetime.timedelta(seconds=rng.uniform(-90, 120))).isoformat(' '),
                 (NOW - datetime.timedelta(seconds=rng.uniform(0, 120))).isoformat(' '),
                 NOW.isoformat(' '), 0 if rng.random() < 0.9 else i)
                for i in range(1, 21)]
        reader = CellServicesReader(
            [CellDatabaseReader(sqlite_cell(tmp_path / f'cell{case}.db', rows))],
            down_time=60, clock=lambda: NOW)
        whole, _ = reader.read_services()
        asked = rng.sample([f'cn{i}' for i in range(1, 23)], rng.randrange(0, 12))

        usual = {h for h, s in whole.items() if h in asked and s.up and not s.disabled
                 and s.disabled_reason is None and not s.forced_down}
        assert reader.usual_again(asked) == {h: whole[h] for h in usual}
        assert reader.unusual_now(asked) == {h: whole[h] for h in asked
                                             if h in whole and h not in usual}


def chosen_with_services_gone(fake, names, gone):
    """One instance placed among ``names`` (all up at the last read; ``gone``'s services
    disabled or down now), and the hosts each read of the services asked about."""
    catalog = HostCatalog(default_cell_uuid=CELL)
    catalog.apply_service_states({h: ServiceState(h, up=True) for h in names})
    asked: list[list[str]] = []

    def unusable_hosts(hosts):
        asked.append(list(hosts))
        return set(gone) & set(hosts)

    with compute_filtered_manager(fake, catalog, unusable_hosts=unusable_hosts) as manager:
        [selection] = select(manager, boot_spec(), uuids(1))
    return selection, asked


def test_a_host_whose_service_went_down_is_passed_over_for_the_next_and_never_offered(
        fake):
    fake.add_compute('cn0', ram_mb=65536)      # the best host, by the RAM weigher
    cn1 = fake.add_compute('cn1', ram_mb=49152)
    fake.add_compute('cn2')

    selection, asked = chosen_with_services_gone(fake, ['cn0', 'cn1', 'cn2'], {'cn0'})

    assert [s.service_host for s in selection] == ['cn1', 'cn2']
    # One read, before the first claim, of the chosen host and the hosts after it,
    # from which the alternates come: the answer reads nothing more.
    assert asked == [['cn0', 'cn1', 'cn2']]
    assert [uuid for uuid, _ in fake.claims()] == uuids(1)
    assert {provider for _, request in fake.claims()
            for provider in request.allocations} == {cn1}


def test_alternates_the_claim_s_read_did_not_reach_are_read_before_they_are_offered(
        fake, monkeypatch):
    from scheduler.pipeline import claim

    monkeypatch.setattr(claim, 'SERVICES_AHEAD', 1)
    for name, ram in (('cn0', 65536), ('cn1', 49152), ('cn2', 40960), ('cn3', 32768)):
        fake.add_compute(name, ram_mb=ram)

    selection, asked = chosen_with_services_gone(fake, ['cn0', 'cn1', 'cn2', 'cn3'], {'cn2'})

    assert [s.service_host for s in selection] == ['cn0', 'cn1', 'cn3']
    assert asked == [['cn0', 'cn1'], ['cn2'], ['cn3']]


def test_a_request_no_host_of_which_is_usable_now_says_why_without_naming_one(fake):
    fake.add_compute('cn0')
    with compute_filtered_manager(fake, HostCatalog(default_cell_uuid=CELL),
                                  unusable_hosts=set) as manager, \
            pytest.raises(Exception) as failed:
        select(manager, boot_spec(), uuids(1))

    assert type(failed.value).__name__ == 'NoValidHost'
    assert SERVICE_GONE in str(failed.value)
    assert 'cn0' not in str(failed.value)
    assert fake.claims() == []
