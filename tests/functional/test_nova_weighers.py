"""Nova's weighers through the real service: real Placement, real RPC.

Three equal hosts and one three-instance request; where the instances land is
read back from Placement.
"""
from __future__ import annotations

from scheduler.catalog import HostCatalog
from scheduler.objects.codec import encode_request_spec
from tests.builders import CONTEXT, SERVICE_CELL, boot_spec, new_uuids
from tests.functional.cloud import add_host, consumers_with_allocations

STACK = {'filter_scheduler.ram_weight_multiplier': -1.0}


def three_hosts(placement_client) -> list[str]:
    return [add_host(placement_client, f'cn{i}') for i in range(3)]


def place(running, spec, uuids) -> list[str]:
    result = running.client.select_destinations(CONTEXT, encode_request_spec(spec), uuids)
    return [per_instance[0].compute_node_uuid for per_instance in result]


def hosts_holding(placement_client, hosts, uuids) -> dict[str, set[str]]:
    held = consumers_with_allocations(placement_client, hosts)
    return {consumer: set(by_rp) for consumer, by_rp in held.items() if consumer in uuids}


def test_a_negative_ram_weight_multiplier_stacks_a_multi_instance_request(
        start_scheduler, placement_client):
    hosts = three_hosts(placement_client)
    running = start_scheduler(**STACK, **{'filter_scheduler.weight_classes': ['RAMWeigher']})
    uuids = new_uuids(3)

    chosen = place(running, boot_spec(num_instances=3), uuids)

    assert len(set(chosen)) == 1
    assert hosts_holding(placement_client, hosts, uuids) == {u: {chosen[0]} for u in uuids}


def test_soft_anti_affinity_spreads_a_request_that_ram_weighing_would_stack(
        start_scheduler, placement_client):
    hosts = three_hosts(placement_client)
    running = start_scheduler(**STACK, **{'filter_scheduler.weight_classes': [
        'RAMWeigher', 'ServerGroupSoftAntiAffinityWeigher']})
    uuids = new_uuids(3)

    chosen = place(running, boot_spec(group_policy='soft-anti-affinity', group_members=uuids,
                                      num_instances=3), uuids)

    assert sorted(chosen) == sorted(hosts)
    assert hosts_holding(placement_client, hosts, uuids) == {
        u: {rp} for u, rp in zip(uuids, chosen, strict=True)}


def test_with_novas_default_weight_classes_a_host_with_recent_build_failures_is_avoided(
        start_scheduler, placement_client, tmp_path):
    # cn0 has the most room, so RAM, CPU and Disk weighers prefer it; one
    # failed build outweighs them (build_failure_weight_multiplier 1000000).
    flaky = add_host(placement_client, 'cn0', vcpus=64, ram_mb=262144, disk_gb=1000)
    sound = [add_host(placement_client, f'cn{i}') for i in (1, 2)]
    hosts_file = tmp_path / 'hosts.yaml'
    hosts_file.write_text('hosts:\n  - nodename: cn0\n    stats:\n      failed_builds: "1"\n')
    running = start_scheduler(
        catalog=HostCatalog.from_file(str(hosts_file), default_cell_uuid=SERVICE_CELL),
        **{'filter_scheduler.weight_classes': ['nova.scheduler.weights.all_weighers']})
    assert {w.name for w in running.service.manager.weighers} >= {
        'BuildFailureWeigher', 'MetricsWeigher', 'ServerGroupSoftAntiAffinityWeigher'}
    [instance] = new_uuids(1)

    [chosen] = place(running, boot_spec(), [instance])

    assert chosen in sound and chosen != flaky
