"""``scheduler-manage explain`` on a real Placement: the embedded cloud (--simulate) and a
live one (--config-file), for a request that would be placed and one that would not.

Placement is read back afterwards: explain must leave no allocation behind.
"""
from __future__ import annotations

import json

from scheduler.cmd.manage import main
from scheduler.cmd.manage_explain import EXIT_NO_VALID_HOST, EXIT_PLACED
from tests.fixtures.placement import ADMIN_TOKEN
from tests.functional.cloud import add_host, consumers_with_allocations

HOSTS = 10
FLAVOR = ['--vcpus', '2', '--memory-mb', '4096', '--disk-gb', '20']
# No simulated host reports a hypervisor type, so ComputeCapabilitiesFilter removes them all.
UNSATISFIABLE = ['--extra-spec', 'capabilities:hypervisor_type=ironic']


def _all_provider_uuids(client) -> list[str]:
    return [rp.uuid for rp in client.get_resource_providers()]


def test_explain_simulated_shows_each_stage_and_the_chosen_host(placement, placement_client,
                                                                capsys):
    code = main(['explain', '--simulate', '--hosts', str(HOSTS), '--top', '3', *FLAVOR])
    out, err = capsys.readouterr()

    assert code == EXIT_PLACED, out + err
    lines = out.splitlines()
    assert lines[0] == 'Request: 1 instance of 2 vCPU, 4096 MB RAM, 20 GB disk'
    assert 'resources=DISK_GB:20,MEMORY_MB:4096,VCPU:2' in lines[2]
    # one of the 10 simulated hosts is disabled, and the request filter keeps it out
    assert lines[3] == '  -> 9 allocation candidates on 9 hosts (limit 1000)'
    assert any(line.split() == ['ComputeFilter', '9', '->', '9'] for line in lines)
    assert '  Weighed: 9 hosts, top 3 (multiplier × normalised value per weigher):' in lines
    assert any(line.split()[0] == 'RAMWeigher' for line in lines)
    [chosen] = [line for line in lines if line.startswith('  Chosen: ')]
    host = chosen.split()[1].rstrip(';')
    assert host.startswith('cn-')
    assert lines[-1] == f'Result: would be placed on {host} (nothing was claimed)'
    # the embedded Placement shares this process's database with the fixture's
    providers = _all_provider_uuids(placement_client)
    assert len(providers) == HOSTS
    assert consumers_with_allocations(placement_client, providers) == {}


def test_explain_simulated_failure_as_json_names_the_filter_and_every_host(placement, capsys):
    code = main(['explain', '--simulate', '--hosts', str(HOSTS), '--json', *FLAVOR,
                 *UNSATISFIABLE])
    out, err = capsys.readouterr()

    assert code == EXIT_NO_VALID_HOST, out + err
    report = json.loads(out)
    assert report['placed'] is False and report['error'] == 'NoValidHost'
    assert report['reason'].startswith('0/9 hosts available: ComputeCapabilitiesFilter '
                                       'removed 9 (extra spec capabilities:hypervisor_type')
    assert report['placement']['candidates'] == 9
    assert report['placement']['truncated'] is False
    [instance] = report['instances']
    stages = {s['name']: s for s in instance['stages']}
    capabilities = stages['ComputeCapabilitiesFilter']
    assert (capabilities['hosts_in'], capabilities['hosts_out']) == (9, 0)
    [removal] = capabilities['removed']
    assert len(removal['hosts']) == 9 and all(h.startswith('cn-') for h in removal['hosts'])
    assert stages['ServerGroupAffinityFilter']['skipped'] == 'no hosts left'
    assert instance['chosen'] is None and instance['weighed'] == []


def test_explain_against_a_live_placement_claims_nothing(placement, placement_client, tmp_path,
                                                         capsys):
    providers = [add_host(placement_client, f'live-{n}', vcpus=8, ram_mb=8192 * (n + 1))
                 for n in range(3)]
    config = tmp_path / 'scheduler.conf'
    config.write_text('[placement]\nauth_type = admin_token\n'
                      f'token = {ADMIN_TOKEN}\nendpoint = {placement.url}\n'
                      f'endpoint_override = {placement.url}\n')

    placed = main(['explain', '--config-file', str(config), '--instances', '2', *FLAVOR])
    failed = main(['explain', '--config-file', str(config), *FLAVOR, *UNSATISFIABLE])
    out, err = capsys.readouterr()

    assert (placed, failed) == (EXIT_PLACED, EXIT_NO_VALID_HOST), out + err
    assert 'Result: would be placed on live-2, live-1 (nothing was claimed)' in out
    assert 'Result: NoValidHost: 0/3 hosts available: ComputeCapabilitiesFilter' in out
    assert consumers_with_allocations(placement_client, providers) == {}
