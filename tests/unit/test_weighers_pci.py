"""PCIWeigher: Nova's rule over the host's free PCI devices (pools from the cell databases
or the hosts file); hosts without known pools all weigh the same."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from scheduler import plugins
from scheduler.objects.pci import parse_pci_pools
from scheduler.weights.base import weigh_hosts
from scheduler.weights.pci import MAX_DEVS, PCIWeigher, free_pci_devices
from scheduler.weights.ram import RAMWeigher
from tests.builders import configured, make_aggregate, make_conf, make_host, make_spec


def with_pools(name, *counts, **host_fields):
    host = make_host(name, **host_fields)
    host.pci_stats = SimpleNamespace(pools=[{'count': c, 'vendor_id': '8086'} for c in counts])
    return host


def test_hosts_without_known_pci_pools_all_weigh_the_same_so_the_order_is_unchanged():
    hosts = [make_host('a', ram=(4096, 0)), make_host('b', ram=(65536, 0))]
    weighed = weigh_hosts([configured(RAMWeigher), configured(PCIWeigher)], hosts, make_spec())
    assert [w.host.host for w in weighed] == ['b', 'a']   # RAM decides alone
    assert {w.contributions['PCIWeigher'] for w in weighed} == {0.0}
    assert {configured(PCIWeigher)._weigh_object(h, make_spec()) for h in hosts} == {MAX_DEVS}


def test_fewer_free_pci_devices_weigh_more_so_pci_hosts_stay_free():
    hosts = [with_pools('rich', 4, 4), make_host('none'), with_pools('poor', 1)]
    weighed = weigh_hosts([configured(PCIWeigher)], hosts, make_spec())
    assert [w.host.host for w in weighed] == ['none', 'poor', 'rich']
    assert free_pci_devices(hosts[0]) == 8


def test_free_devices_beyond_the_cap_do_not_tell_hosts_apart():
    weigher = configured(PCIWeigher)
    raw = [weigher._weigh_object(with_pools(f'h{n}', n), make_spec()) for n in (99, 500, 2000)]
    assert raw == [1, 1, 1]


def test_the_pci_multiplier_comes_from_an_aggregate_of_the_host_when_set():
    boost = make_aggregate('gpu', metadata={'pci_weight_multiplier': '3.5'})
    weigher = configured(PCIWeigher, pci_weight_multiplier=2.0)
    assert weigher.weight_multiplier(make_host('h', aggregates=[boost])) == 3.5
    assert weigher.weight_multiplier(make_host('other')) == 2.0


def test_pools_from_the_hosts_file_count_their_free_devices():
    pools = parse_pci_pools([{'vendor_id': '8086', 'product_id': '154d', 'count': 3},
                             {'vendor_id': '10de', 'product_id': '1eb8', 'count': 1}],
                            where='test', strict=True)
    assert free_pci_devices(make_host('h', pci_pools=pools)) == 4


@pytest.mark.parametrize(('multiplier', 'told'), [(1.0, True), (0.0, False)])
def test_start_up_says_where_pci_pools_come_from_when_the_weigher_counts(caplog, multiplier,
                                                                         told):
    caplog.set_level(logging.INFO, logger='scheduler.weights.pci')
    plugins.load_weighers(make_conf(filter_scheduler={'weight_classes': ['PCIWeigher'],
                                                      'pci_weight_multiplier': multiplier}))
    notices = [r.getMessage() for r in caplog.records if r.name == 'scheduler.weights.pci']
    assert bool(notices) is told
    assert all('PCI device pools come only from the hosts file' in n for n in notices)


def test_the_table_weighs_as_the_per_host_rule_and_follows_devices_a_consume_takes():
    import numpy as np

    from scheduler.host_table import HostTable

    pools = parse_pci_pools([{'vendor_id': '8086', 'product_id': '154d', 'count': 2}],
                            where='test', strict=True)
    hosts = [with_pools('dicts', 3, 2), make_host('none'), make_host('ours', pci_pools=pools)]
    table = HostTable.from_hosts(hosts)
    weigher, spec = configured(PCIWeigher), make_spec()
    rows = np.arange(len(hosts))
    assert weigher.raw_weights(table, rows, spec).tolist() == [
        weigher._weigh_object(h, spec) for h in hosts] == [95, 100, 98]

    ours = table.host(2)
    ours.pci_stats = ours.pci_stats.minus({0: 1})   # what HostState.consume does, then says so
    ours.on_consume(ours)
    assert weigher.raw_weights(table, rows, spec).tolist() == [95, 100, 99]
