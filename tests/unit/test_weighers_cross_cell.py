"""CrossCellWeigher: during a cross-cell move, hosts in the instance's own cell win."""
from __future__ import annotations

import pytest

from scheduler.objects.spec import CellMapping, Destination
from scheduler.weights.base import weigh_hosts
from scheduler.weights.cross_cell import CrossCellWeigher
from scheduler.weights.ram import RAMWeigher
from tests.builders import configured, make_aggregate, make_host, make_spec

SOURCE = '00000000-0000-4000-8000-0000000000c1'
OTHER = '00000000-0000-4000-8000-0000000000c2'


def move(*, cross_cell: bool = True, cell: str | None = SOURCE):
    return make_spec(requested_destination=Destination(
        cell=CellMapping(uuid=cell) if cell else None, allow_cross_cell_move=cross_cell))


def hosts():
    # The other cell's host has more free RAM, so RAMWeigher alone would pick it.
    return [make_host('there', cell_uuid=OTHER, ram=(65536, 0)),
            make_host('here', cell_uuid=SOURCE, ram=(8192, 0))]


def test_a_cross_cell_move_stays_in_the_source_cell_when_it_can():
    weighers = [configured(RAMWeigher), configured(CrossCellWeigher)]
    weighed = weigh_hosts(weighers, hosts(), move())
    assert [w.host.host for w in weighed] == ['here', 'there']
    # +1 / -1 normalise to 1 / 0, times the default 1000000
    assert weighed[0].contributions['CrossCellWeigher'] == pytest.approx(1_000_000.0)
    assert weighed[1].contributions['CrossCellWeigher'] == 0.0


@pytest.mark.parametrize('spec', [
    make_spec(),
    move(cross_cell=False),
    move(cell=None),
], ids=['not a move', 'cross-cell not allowed', 'no source cell'])
def test_other_requests_weigh_zero_everywhere(spec):
    weigher = configured(CrossCellWeigher)
    assert [weigher._weigh_object(h, spec) for h in hosts()] == [0, 0]


def test_the_raw_weight_is_plus_one_in_the_source_cell_and_minus_one_elsewhere():
    weigher = configured(CrossCellWeigher)
    assert [weigher._weigh_object(h, move()) for h in hosts()] == [-1, 1]


def test_a_negative_multiplier_prefers_leaving_the_source_cell():
    weighed = weigh_hosts([configured(CrossCellWeigher, cross_cell_move_weight_multiplier=-1.0)],
                          list(reversed(hosts())), move())
    assert [w.host.host for w in weighed] == ['there', 'here']


def test_the_multiplier_of_a_host_comes_from_its_aggregate_when_set():
    quiet = make_aggregate('quiet', metadata={'cross_cell_move_weight_multiplier': '2'})
    host = make_host('h', cell_uuid=SOURCE, aggregates=[quiet])
    weigher = configured(CrossCellWeigher)
    assert weigher.weight_multiplier(host) == 2.0
    assert weigher.weight_multiplier(make_host('plain')) == 1_000_000.0
