"""The whole select_destinations RPC API (4.0-4.5), over the real RPC and the real Placement.

Every version is called the way a conductor of that release calls it, on both
transports (RabbitMQ and oslo.messaging's in-process driver); the 4.0 payload
is Nova's real message (tests/fixtures/wire/select_destinations_older_versions.json)
and the test cloud is built to carry its host names. What Placement holds
afterwards is read back from Placement itself.
"""
from __future__ import annotations

import json
import logging
import uuid

import pytest

from scheduler import exceptions as exc
from scheduler.catalog import HostCatalog
from scheduler.objects.codec import encode_request_spec
from scheduler.objects.spec import Destination
from scheduler.rpc.client import SchedulerClient
from scheduler.simulate import seed
from tests.builders import CONTEXT, PROJECT, SERVICE_CELL, USER, boot_spec, new_uuids
from tests.fixtures import wire_samples
from tests.functional.cloud import add_host, consumers_with_allocations

AZ1_AGGREGATE = '445fd4b4-80eb-55fe-bf3c-0520043da8af'


def remote_class(error: BaseException) -> str:
    """The failure's class name as the caller sees it: oslo.messaging rebuilds it
    over RabbitMQ as a RemoteError (module not in allowed_remote_exmods), the
    in-process driver hands over the exception itself."""
    return getattr(error, 'exc_type', None) or type(error).__name__


# ---------------------------------------------------------------------- the 4.0 sample's cloud


def sample_cloud(placement_client, tmp_path) -> tuple[HostCatalog, dict[str, str]]:
    """compute-01 and compute-02 (nodes compute-0N.example.org) as the 4.0 sample
    expects them: AVX2 and VIRTIO_PACKED roots in AZ az1, each with an NVIDIA A16
    vGPU child. compute-01 has the most RAM, so only the requested destination
    sends the request to compute-02. (compute-03, where the sample's group
    already runs, need not exist.)"""
    for trait in ('CUSTOM_NVIDIA_A16', 'CUSTOM_MAINTENANCE'):
        seed.ensure_trait(placement_client, trait)
    roots = {}
    for i, ram_mb in ((1, 65536), (2, 32768)):
        node = f'compute-0{i}.example.org'
        root = seed.create_provider(
            placement_client, name=node, uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, node)),
            inventories={'VCPU': {'total': 16}, 'MEMORY_MB': {'total': ram_mb},
                         'DISK_GB': {'total': 200}},
            traits=['HW_CPU_X86_AVX2', 'COMPUTE_NET_VIRTIO_PACKED'], aggregates=[AZ1_AGGREGATE])
        seed.create_provider(placement_client, name=f'{node}-gpu', parent_uuid=root,
                             inventories={'VGPU': {'total': 4}}, traits=['CUSTOM_NVIDIA_A16'])
        roots[f'compute-0{i}'] = root
    hosts_file = tmp_path / 'hosts.yaml'
    hosts_file.write_text(
        'aggregates:\n'
        f'  - {{name: az1-hosts, uuid: {AZ1_AGGREGATE},\n'
        '     hosts: [compute-01, compute-02],\n'
        '     metadata: {availability_zone: az1}}\n'
        'hosts:\n' + ''.join(
            f'  - {{nodename: compute-0{i}.example.org, service_host: compute-0{i}}}\n'
            for i in (1, 2)))
    return HostCatalog.from_file(str(hosts_file), default_cell_uuid=SERVICE_CELL), roots


def everything_held(placement_client, roots) -> dict:
    return consumers_with_allocations(placement_client, list(roots.values()))


@pytest.mark.parametrize('version', ['4.0', '4.1', '4.2'])
def test_a_legacy_caller_sends_dicts_gets_host_dicts_and_nothing_is_claimed(
        start_scheduler, placement_client, tmp_path, version):
    catalog, roots = sample_cloud(placement_client, tmp_path)
    running = start_scheduler(catalog=catalog)
    legacy = wire_samples.legacy_args()   # Nova's real 4.0 message, unmodified

    result = running.client.call(CONTEXT, 'select_destinations', version=version,
                                 request_spec=legacy['request_spec'],
                                 filter_properties=legacy['filter_properties'])

    # num_instances 2, requested destination compute-02 / compute-02.example.org
    assert result == [{'host': 'compute-02', 'nodename': 'compute-02.example.org',
                       'limits': {}}] * 2
    assert everything_held(placement_client, roots) == {}


def test_a_4_3_caller_without_instance_uuids_gets_host_dicts_and_nothing_is_claimed(
        start_scheduler, placement_client):
    hosts = [add_host(placement_client, f'cn{i}', ram_mb=8192 * (i + 1)) for i in range(2)]
    running = start_scheduler()

    result = running.client.call(CONTEXT, 'select_destinations', version='4.3',
                                 spec_obj=encode_request_spec(boot_spec(num_instances=2)))

    # The first instance's consumption counts for the second, as in Nova.
    assert [r['host'] for r in result] == ['cn1', 'cn1']
    assert result[0] == {'host': 'cn1', 'nodename': 'cn1', 'limits': {}}
    assert consumers_with_allocations(placement_client, hosts) == {}


def test_a_4_4_caller_gets_claims_and_host_dicts(start_scheduler, placement_client):
    hosts = [add_host(placement_client, f'cn{i}') for i in range(2)]
    running = start_scheduler()
    uuids = new_uuids(2)

    result = running.client.call(CONTEXT, 'select_destinations', version='4.4',
                                 spec_obj=encode_request_spec(boot_spec(num_instances=2)),
                                 instance_uuids=uuids)

    assert [set(r) for r in result] == [{'host', 'nodename', 'limits'}] * 2
    held = consumers_with_allocations(placement_client, hosts)
    assert set(held) == set(uuids)
    assert [r['host'] for r in result] == [
        f'cn{hosts.index(next(iter(held[u])))}' for u in uuids]


def test_a_4_5_caller_gets_selection_objects_with_claims_and_alternates(
        start_scheduler, placement_client):
    hosts = [add_host(placement_client, f'cn{i}') for i in range(3)]
    running = start_scheduler()
    [instance] = new_uuids(1)

    result = running.client.call(CONTEXT, 'select_destinations', version='4.5',
                                 spec_obj=encode_request_spec(boot_spec()),
                                 instance_uuids=[instance], return_objects=True,
                                 return_alternates=True)

    [[chosen, *alternates]] = result
    assert chosen['nova_object.name'] == 'Selection'
    assert chosen['nova_object.version'] == '1.1'
    data = chosen['nova_object.data']
    assert consumers_with_allocations(placement_client, hosts) == {
        instance: {data['compute_node_uuid']: {'VCPU': 1, 'MEMORY_MB': 1024, 'DISK_GB': 10}}}
    assert json.loads(data['allocation_request'])['allocations'] == {
        data['compute_node_uuid']: {'resources': {'VCPU': 1, 'MEMORY_MB': 1024,
                                                  'DISK_GB': 10}}}
    assert len(alternates) == 2


# ---------------------------------------------------------------------- what oslo.messaging answers


UNANSWERABLE = [
    ('run_instance', '4.5', None, 'NoSuchMethod'),               # removed before 4.0
    ('_cast', '4.0', None, 'NoSuchMethod'),                      # private: never dispatched
    ('manager', '4.5', None, 'NoSuchMethod'),                    # no attribute is a method
    ('select_destinations', '5.0', None, 'UnsupportedVersion'),  # another major
    ('select_destinations', '4.6', None, 'UnsupportedVersion'),  # a newer minor
    ('ping', '1.2', 'baseapi', 'UnsupportedVersion'),
]


def test_unknown_methods_and_versions_are_answered_as_oslo_messaging_does(start_scheduler):
    running = start_scheduler()
    answers = []

    for method, version, namespace, _ in UNANSWERABLE:
        with pytest.raises(Exception) as failure:
            running.client.call(CONTEXT, method, version=version, namespace=namespace)
        answers.append(remote_class(failure.value))

    assert answers == [expected for *_, expected in UNANSWERABLE]
    # ... and the service goes on serving.
    assert running.client.call(CONTEXT, 'ping', version='1.1', namespace='baseapi',
                               arg=1) == {'service': 'scheduler', 'arg': 1}


# ---------------------------------------------------------------------- rebuild check


def test_a_rebuild_check_passes_the_instances_full_host_without_touching_placement(
        start_scheduler, placement_client):
    cn0 = add_host(placement_client, 'cn0', vcpus=2, ram_mb=2048, disk_gb=20)
    add_host(placement_client, 'cn1', ram_mb=65536)
    [instance] = new_uuids(1)
    # The instance fills its own host: asking Placement for candidates would fail.
    seed.allocate(placement_client, instance,
                  {cn0: {'VCPU': 2, 'MEMORY_MB': 2048, 'DISK_GB': 20}}, PROJECT, USER)
    before = placement_client.get_allocations(instance)
    running = start_scheduler()
    rebuild = boot_spec(vcpus=2, ram_mb=2048, disk_gb=20, force_hosts=['cn0'],
                        force_nodes=['cn0'])
    rebuild.scheduler_hints['_nova_check_type'] = ['rebuild']

    [[chosen]] = running.client.select_destinations(
        CONTEXT, encode_request_spec(rebuild), [instance], return_alternates=False)

    assert (chosen.service_host, chosen.compute_node_uuid) == ('cn0', cn0)
    assert chosen.allocation_request == 'null'
    assert chosen.allocation_request_version is None
    assert placement_client.get_allocations(instance) == before


# ---------------------------------------------------------------------- moves


def test_an_evacuated_instance_holds_source_and_destination_after_the_claim(
        start_scheduler, placement_client):
    source = add_host(placement_client, 'source', ram_mb=65536)
    dest = add_host(placement_client, 'dest')
    [instance] = new_uuids(1)
    seed.allocate(placement_client, instance,
                  {source: {'VCPU': 1, 'MEMORY_MB': 1024, 'DISK_GB': 10}}, PROJECT, USER)
    running = start_scheduler()

    [[chosen]] = running.client.select_destinations(
        CONTEXT, encode_request_spec(boot_spec(ignore_hosts=['source'])), [instance],
        return_alternates=False)

    assert chosen.compute_node_uuid == dest
    held = placement_client.get_allocations(instance)
    assert held.allocations == {rp: {'VCPU': 1, 'MEMORY_MB': 1024, 'DISK_GB': 10}
                                for rp in (source, dest)}
    assert (held.consumer_generation, held.project_id, held.user_id) == (2, PROJECT, USER)


def test_a_failed_move_request_gives_the_instance_its_previous_allocations_back(
        start_scheduler, placement_client):
    source = add_host(placement_client, 'source', ram_mb=65536)
    dest = add_host(placement_client, 'dest', vcpus=1)    # room for one instance
    instance, new = new_uuids(2)
    seed.allocate(placement_client, instance,
                  {source: {'VCPU': 1, 'MEMORY_MB': 1024, 'DISK_GB': 10}}, PROJECT, USER)
    running = start_scheduler()

    with pytest.raises(exc.NoValidHost):
        running.client.select_destinations(
            CONTEXT, encode_request_spec(boot_spec(num_instances=2, ignore_hosts=['source'])),
            [instance, new])

    assert consumers_with_allocations(placement_client, [source, dest]) == {
        instance: {source: {'VCPU': 1, 'MEMORY_MB': 1024, 'DISK_GB': 10}}}
    # Restored by a PUT on top of the move claim, not deleted and re-created.
    assert placement_client.get_allocations(instance).consumer_generation == 3


def test_a_forced_host_bypasses_the_filters_but_not_placement(start_scheduler,
                                                              placement_client, tmp_path):
    hosts_file = tmp_path / 'hosts.yaml'
    hosts_file.write_text('hosts:\n  - {nodename: cn1, disabled: true}\n')
    add_host(placement_client, 'cn0', ram_mb=65536)
    cn1 = add_host(placement_client, 'cn1')
    running = start_scheduler(catalog=HostCatalog.from_file(str(hosts_file),
                                                            default_cell_uuid=SERVICE_CELL))
    [instance] = new_uuids(1)

    # cn1's service is disabled: ComputeFilter removes it unless the host is forced.
    with pytest.raises(exc.NoValidHost):
        running.client.select_destinations(CONTEXT, encode_request_spec(
            boot_spec(requested_destination=Destination(host='cn1'))), [instance])
    [[chosen]] = running.client.select_destinations(
        CONTEXT, encode_request_spec(boot_spec(force_hosts=['cn1'])), [instance])

    assert chosen.compute_node_uuid == cn1
    assert set(consumers_with_allocations(placement_client, [cn1])) == {instance}


# ---------------------------------------------------------------------- call-monitor heartbeats


@pytest.mark.parametrize('transport_url', ['rabbit'], indirect=True)
def test_a_call_longer_than_the_callers_call_monitor_timeout_still_succeeds(
        start_scheduler, placement_client, transport_url, monkeypatch, caplog):
    add_host(placement_client, 'cn0')
    monkeypatch.setenv('SLOW_FILTER_SECONDS', '3')
    running = start_scheduler(**{
        'filter_scheduler.enabled_filters': ['tests.functional.slow_filter.SlowFilter']})
    # The conductor waits at most rpc_response_timeout between two messages of
    # the server; oslo.messaging's server sends a heartbeat every half of it.
    caller = SchedulerClient(running.service.transport, topic=running.conf.scheduler.rpc_topic,
                             timeout=60, call_monitor_timeout=2)

    with caplog.at_level(logging.DEBUG, logger='oslo_messaging.rpc.dispatcher'):
        [[chosen]] = caller.select_destinations(CONTEXT, encode_request_spec(boot_spec()),
                                                new_uuids(1), return_alternates=False)

    assert chosen.service_host == 'cn0'
    assert 'Sending call-monitor heartbeat' in caplog.text
