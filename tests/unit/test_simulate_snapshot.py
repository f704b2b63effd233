"""Placement snapshots: JSON round trip, validation of saved files, capacity arithmetic."""
from __future__ import annotations

import json

import pytest

from scheduler.exceptions import ConfigurationError
from scheduler.objects.spec import Aggregate
from scheduler.simulate.snapshot import (
    FORMAT_VERSION,
    CloudSnapshot,
    ProviderSnapshot,
    SnapshotError,
    from_dict,
    load,
    save,
    to_dict,
    usage_consumer,
    usage_consumers,
)


def _inv(total: int, ratio: float = 1.0, reserved: int = 0) -> dict:
    return {'total': total, 'reserved': reserved, 'min_unit': 1, 'max_unit': total,
            'step_size': 1, 'allocation_ratio': ratio}


ROOT = ProviderSnapshot(
    uuid='11111111-1111-4111-8111-111111111111', name='cn-1', generation=7,
    parent_provider_uuid=None, root_provider_uuid='11111111-1111-4111-8111-111111111111',
    inventories={'VCPU': _inv(8, 4.0), 'MEMORY_MB': _inv(16384, reserved=512)},
    usages={'VCPU': 6, 'MEMORY_MB': 4096}, traits=('CUSTOM_SSD', 'HW_CPU_X86_AVX2'),
    aggregates=('aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa',))
CHILD = ProviderSnapshot(
    uuid='22222222-2222-4222-8222-222222222222', name='cn-1-disk', generation=2,
    parent_provider_uuid=ROOT.uuid, root_provider_uuid=ROOT.uuid,
    inventories={'DISK_GB': _inv(100)})
SNAPSHOT = CloudSnapshot(
    providers=(ROOT, CHILD), source='test',
    nova_aggregates=(Aggregate(id=1, uuid='aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa', name='az1',
                               hosts=['cn-1'], metadata={'availability_zone': 'az1'}),))


def test_a_snapshot_survives_a_json_round_trip_unchanged(tmp_path):
    path = tmp_path / 'snap.json'
    save(SNAPSHOT, str(path))
    assert json.loads(path.read_text())['format_version'] == FORMAT_VERSION
    assert load(str(path)) == SNAPSHOT


def test_capacity_and_free_follow_placement_arithmetic():
    assert ROOT.capacity('VCPU') == 32
    assert ROOT.free('VCPU') == 26
    assert ROOT.capacity('MEMORY_MB') == 15872
    assert ROOT.free('MEMORY_MB') == 15872 - 4096
    assert ROOT.capacity('DISK_GB') == 0


def test_roots_are_the_providers_without_a_parent():
    assert SNAPSHOT.roots == (ROOT,)


def test_usage_consumers_are_stable_and_only_for_providers_with_usage():
    assert usage_consumers(SNAPSHOT) == frozenset({usage_consumer(ROOT.uuid)})
    assert usage_consumer(ROOT.uuid) == usage_consumer(ROOT.uuid) != usage_consumer(CHILD.uuid)


@pytest.mark.parametrize('mutate, message', [
    (lambda d: d.update(format_version=99), 'format_version'),
    (lambda d: d.pop('providers'), '"providers" is missing'),
    (lambda d: d['providers'][1].update(parent_provider_uuid='33333333-3333-4333-8333-'
                                                             '333333333333'),
     'is not in the snapshot'),
    (lambda d: d['providers'][0]['usages'].update(VCPU=-1), 'usages'),
    (lambda d: d['providers'][0]['inventories']['VCPU'].pop('total'), '"total" is missing'),
    (lambda d: d['providers'][0].update(traits='CUSTOM_SSD'), 'traits'),
    (lambda d: d['providers'].append(dict(d['providers'][0])), 'duplicate provider'),
])
def test_a_damaged_snapshot_is_refused_with_the_reason(mutate, message):
    data = to_dict(SNAPSHOT)
    mutate(data)
    with pytest.raises(SnapshotError, match=message):
        from_dict(data)


def test_an_unreadable_snapshot_file_is_a_configuration_error(tmp_path):
    path = tmp_path / 'snap.json'
    path.write_text('{not json')
    with pytest.raises(ConfigurationError, match='not JSON'):
        load(str(path))
    with pytest.raises(ConfigurationError, match='cannot read'):
        load(str(tmp_path / 'missing.json'))
