"""Nova compute API JSON -> catalog records (scheduler.catalog.nova_api)."""
from __future__ import annotations

import copy
import datetime
import json
import random
import sys

import pytest

from scheduler.catalog import nova_api
from scheduler.catalog.nova_api import NovaApiError
from tests.fixtures import nova_api_samples as samples

UTC = datetime.timezone.utc


def test_aggregates_keep_uuid_id_name_hosts_and_string_metadata():
    london, ssd = nova_api.parse_aggregates(samples.AGGREGATES)
    assert (london.id, london.uuid, london.name, london.hosts) == (
        1, samples.AGG_LONDON, 'london-az', ['compute1'])
    assert london.availability_zone == 'london'
    assert ssd.metadata == {'ssd': 'true', 'cpu_weight_multiplier': '2.0'}
    assert ssd.hosts == ['compute1', 'compute2']


def test_an_aggregate_s_hosts_are_the_one_string_of_each_name_every_read_shares():
    # Each sync decodes the answer anew; an availability zone names every host.
    first = nova_api.parse_aggregates(json.loads(json.dumps(samples.AGGREGATES)))
    again = nova_api.parse_aggregates(json.loads(json.dumps(samples.AGGREGATES)))
    assert [a.hosts for a in first] == [a.hosts for a in again]
    assert all(x is y for a, b in zip(first, again, strict=True)
               for x, y in zip(a.hosts, b.hosts, strict=True))


def test_a_top_level_zone_missing_from_the_metadata_is_kept_as_metadata():
    body = copy.deepcopy(samples.AGGREGATES)
    body['aggregates'][0]['metadata'] = {}
    assert nova_api.parse_aggregates(body)[0].availability_zone == 'london'


@pytest.mark.parametrize('change, complaint', [
    ({'uuid': None}, 'aggregates[0].uuid'),
    ({'uuid': 'not-a-uuid'}, 'expected a UUID'),
    ({'id': '1'}, 'aggregates[0].id'),
    ({'metadata': {'ssd': True}}, 'aggregates[0].metadata.ssd'),
    ({'hosts': 'compute1'}, 'aggregates[0].hosts'),
])
def test_a_malformed_aggregate_fails_the_whole_document_naming_the_field(change, complaint):
    body = copy.deepcopy(samples.AGGREGATES)
    body['aggregates'][0].update(change)
    with pytest.raises(NovaApiError, match=complaint.replace('[', r'\[').replace(']', r'\]')):
        nova_api.parse_aggregates(body)


def test_a_body_without_the_expected_list_is_an_error():
    with pytest.raises(NovaApiError, match='"aggregates" list'):
        nova_api.parse_aggregates({'error': 'nope'})


def test_services_are_compute_services_by_host_with_nova_s_verdict():
    services, unknown = nova_api.parse_services(samples.SERVICES)
    assert set(services) == {'compute1', 'compute2'}  # the scheduler service is not a host
    assert unknown == []
    up = services['compute1']
    assert (up.up, up.disabled, up.forced_down, up.disabled_reason) == (True, False, False, None)
    assert up.updated_at is None  # Nova's verdict decides, not our age of its heartbeat
    down = services['compute2']
    assert (down.up, down.disabled, down.forced_down) == (False, True, True)
    assert down.disabled_reason == 'hardware repair'


def test_an_up_service_has_no_heartbeat_to_re_age_and_a_down_one_its_last():
    services, _ = nova_api.parse_services(samples.SERVICES)
    assert services['compute1'].last_seen_up is None
    assert services['compute2'].last_seen_up == datetime.datetime(2012, 9, 18, 8, 3, 38,
                                                                  tzinfo=UTC)
    never = nova_api.ServiceState(host='h', up=False, updated_at=None)
    assert never.last_seen_up == nova_api.NEVER


def test_services_of_down_cells_are_reported_as_unknown_not_guessed():
    body = {'services': [{'binary': 'nova-compute', 'host': 'lost1', 'zone': 'nova',
                          'status': 'UNKNOWN'}]}
    assert nova_api.parse_services(body) == ({}, ['lost1'])


def test_one_host_name_in_two_cells_takes_the_more_cautious_state():
    body = {'services': [samples.compute_service('twin'),
                         samples.compute_service('twin', up=False, disabled=True, reason='r')]}
    twin = nova_api.parse_services(body)[0]['twin']
    assert (twin.up, twin.disabled, twin.disabled_reason) == (False, True, 'r')


def test_up_and_enabled_services_are_held_by_host_alone_and_read_as_states():
    body = {'services': [samples.compute_service('a'), samples.compute_service('b'),
                         samples.compute_service('c', disabled=True, reason='r')]}
    services, _ = nova_api.parse_services(body)
    assert services.usual == {'a', 'b'} and set(services.other) == {'c'}
    assert services['a'] == nova_api.ServiceState('a', up=True)
    assert services.get('c').disabled_reason == 'r'
    assert services.get('z') is None and 'z' not in services and 'a' in services
    assert sorted(services) == ['a', 'b', 'c'] and len(services) == 3
    with pytest.raises(KeyError):
        services['z']


def _record_by_record(body):
    """Each host's state from its records alone, the more cautious of a host's two: what
    a read means, however it is held."""
    states = {}
    for i, item in enumerate(body['services']):
        if item.get('binary') != nova_api.COMPUTE_BINARY:
            continue
        state = nova_api._service(item, f'services[{i}]')
        if state is not None:
            held = states.get(state.host)
            states[state.host] = state if held is None else nova_api._worse(held, state)
    return states


def test_a_read_held_by_host_alone_is_every_host_s_state_record_by_record():
    rng = random.Random(23)
    hosts = [f'compute{i}' for i in range(12)] + ['compute0', 'compute3']  # two in two cells
    parser = nova_api.ServicesParser()
    for _ in range(300):
        body = _services_read(rng, hosts)
        for service in body['services']:
            if rng.random() < 0.05 and service.get('status') == 'enabled':
                service['disabled_reason'] = ''     # no reason, written as an empty one
        services, _ = parser.parse(body)
        assert dict(services.items()) == _record_by_record(body)
        assert not services.usual & services.other.keys()
        assert not any(nova_api._usual_state(s) for s in services.other.values())


def test_states_updated_move_hosts_between_held_by_host_and_held_as_states():
    state = nova_api.ServiceState
    states = nova_api.ServiceStates({'a', 'b'}, {'c': state('c', up=False)})
    after = states.updated({'a': state('a', up=True, disabled=True), 'c': state('c', up=True),
                            'd': state('d', up=True)})
    assert after.usual == {'b', 'c', 'd'} and dict(after.other) == {
        'a': state('a', up=True, disabled=True)}
    assert states.usual == {'a', 'b'} and set(states.other) == {'c'}   # left as it was
    assert nova_api.ServiceStates.of(dict(after.items())) == after


@pytest.mark.parametrize('change', [{'state': 'sideways'}, {'status': 'paused'},
                                    {'forced_down': 'no'}, {'updated_at': 'yesterday'},
                                    {'host': ''}])
def test_a_malformed_compute_service_is_an_error(change):
    body = {'services': [dict(samples.compute_service('h'), **change)]}
    with pytest.raises(NovaApiError, match=r'services\[0\]'):
        nova_api.parse_services(body)


def _services_read(rng, hosts):
    """A GET /os-services answer: each host up or down, enabled or disabled, forced
    down or not, with a heartbeat from a small set (so reads repeat records)."""
    services = []
    for host in hosts:
        disabled = rng.random() < 0.2
        service = samples.compute_service(
            host, up=rng.random() < 0.8, disabled=disabled,
            reason=rng.choice([None, 'maintenance']) if disabled else None,
            forced_down=rng.random() < 0.1,
            updated_at=f'2026-11-27T16:00:0{rng.randrange(3)}.000000')
        services.append(service)
    if rng.random() < 0.3:  # a down cell
        services.append({'binary': 'nova-compute', 'host': rng.choice(hosts),
                         'status': 'UNKNOWN'})
    return {'services': services}


def test_a_parser_that_remembers_the_last_read_answers_as_a_fresh_parse_of_each():
    rng = random.Random(7)
    hosts = [f'compute{i}' for i in range(12)] + ['compute0']  # one host in two cells
    parser = nova_api.ServicesParser()
    for _ in range(200):
        body = _services_read(rng, hosts)
        assert parser.parse(body) == nova_api.parse_services(body)


def test_an_unchanged_record_gives_the_same_state_and_an_up_service_s_heartbeat_is_no_change():
    parser = nova_api.ServicesParser()
    first, _ = parser.parse(samples.SERVICES)
    body = copy.deepcopy(samples.SERVICES)
    for service in body['services']:
        service['updated_at'] = '2012-10-29T13:42:15.000000'
    second, _ = parser.parse(body)
    assert 'compute1' in second.usual                       # up: its heartbeat is not kept
    assert second['compute2'] is not first['compute2']      # down: its last heartbeat is
    assert second['compute2'].last_seen_up == datetime.datetime(2012, 10, 29, 13, 42, 15,
                                                                tzinfo=UTC)


def test_the_keys_of_a_read_give_another_parser_the_same_states():
    rng = random.Random(11)
    hosts = [f'compute{i}' for i in range(12)] + ['compute0']
    reader, follower = nova_api.ServicesParser(), nova_api.ServicesParser()
    for _ in range(50):
        body = _services_read(rng, hosts)
        services, unknown, keys = reader.parse_with_keys(body)
        shipped = json.loads(json.dumps(keys))   # as workers hand them over
        assert follower.parse_keys(shipped) == (services, unknown)


#: disabled_reason values that put record separators, quotes, braces and escapes
#: inside a string, where splitting the answer's bytes must not cut.
_TRICKY_REASONS = ['}, {', '},{', '"}, {"binary": "nova-compute", "host": "x"',
                   '}]}', 'back\\slash \\"}, {', 'ünïcødé }, { ☃', '{"services": [']


def _written(rng, body):
    """The answer as some compute API could write it: nova-api's json.dumps, its
    compact form, an indented one, or with keys added beside the list."""
    shape = rng.randrange(6)
    if shape == 0:
        return json.dumps(body, separators=(',', ':')).encode()
    if shape == 1:
        return json.dumps(body, indent=rng.choice([None, 1])).encode()
    if shape == 2:
        return json.dumps(dict(body, links=[{'rel': 'next'}])).encode()
    if shape == 3:
        return json.dumps(body, ensure_ascii=False).encode()
    return json.dumps(body).encode()


def _tricky_read(rng, hosts):
    body = _services_read(rng, hosts)
    for service in body['services']:
        roll = rng.random()
        if roll < 0.15:
            service['disabled_reason'] = rng.choice(_TRICKY_REASONS)
        elif roll < 0.2:
            service['binary'] = 'nova-conductor'
        elif roll < 0.23:
            service['extra'] = [{'a': 1}, {'b': 2}]   # a list of objects inside a record
    return body


def _outcome(parse, raw):
    try:
        return parse(raw)
    except NovaApiError as e:
        return type(e)


def test_a_read_of_the_answer_s_bytes_answers_as_decoding_it_whole():
    rng = random.Random(5)
    hosts = [f'compute{i}' for i in range(10)] + ['compute0']
    parser = nova_api.ServicesParser()
    for _ in range(300):
        raw = _written(rng, _tricky_read(rng, hosts))
        assert _outcome(parser.parse_raw_with_keys, raw) == _outcome(
            lambda r: nova_api.ServicesParser().parse_with_keys(json.loads(r)), raw), raw


@pytest.mark.parametrize('raw', [b'', b'[]', b'{"services": {}}', b'{"services": [1, 2]}',
                                 b'{"services": [{"binary": "nova-compute"}] ',
                                 b'not json at all'])
def test_an_answer_that_is_not_a_services_list_is_an_error(raw):
    with pytest.raises(NovaApiError):
        nova_api.ServicesParser().parse_raw_with_keys(raw)


def test_keys_taken_from_another_process_are_one_tuple_each_and_the_catalog_s_hosts():
    reader, follower = nova_api.ServicesParser(), nova_api.ServicesParser()
    services, unknown, keys = reader.parse_with_keys(samples.SERVICES)
    shipped = json.loads(json.dumps(keys))
    host = sys.intern(''.join(['compute', '1']))

    taken = nova_api.taken_keys(shipped)

    assert taken == keys
    assert follower.parse_keys(taken) == (services, unknown)
    # The parser remembers the keys of the services other than up and enabled, as taken.
    unusual = [key for key in taken if key[1:] != ('enabled', 'up', None, False, None)]
    assert unusual and len(unusual) < len(taken)
    assert all(key is held for key, held in zip(unusual, follower._last, strict=True))
    assert [key for key in taken if key[0] == host][0][0] is host
    # What is not a list of keys is left for the parser to refuse.
    assert nova_api.taken_keys({'a': 1}) == {'a': 1}
    with pytest.raises(NovaApiError):
        follower.parse_keys(nova_api.taken_keys([[1, 2], 'x']))


def test_an_up_enabled_service_s_state_is_found_by_host_and_no_key_of_it_is_kept():
    parser = nova_api.ServicesParser()
    keys = [(f'compute{i}', 'enabled', 'up', None, False, None) for i in range(3)] + [
        ('compute9', 'disabled', 'down', 'maintenance', True, '2026-12-01T00:00:00.000000')]
    first, _ = parser.parse_keys([list(k) for k in keys])

    again, _ = parser.parse_keys([list(k) for k in keys])

    assert again.usual == {'compute0', 'compute1', 'compute2'}    # by host, no state each
    assert again['compute9'] is first['compute9']
    assert list(parser._last) == [keys[3]]
    # A usual key is one exactly: forced_down 0 is not false, and is refused as before.
    with pytest.raises(NovaApiError):
        parser.parse_keys([['compute0', 'enabled', 'up', None, 0, None]])
    # The state a usual key finds by host must be a usual one: a host disabled at the
    # last read and enabled since is enabled.
    moved, _ = parser.parse_keys([['compute9', 'enabled', 'up', None, False, None]])
    assert moved['compute9'] == nova_api.ServiceState('compute9', up=True)


def test_a_digest_of_keys_tells_a_read_that_moved_from_one_that_did_not():
    keys = [(f'compute{i}', 'enabled', 'up', None, False, None) for i in range(3)]
    same = [tuple(k) for k in json.loads(json.dumps(keys))]
    moved = keys[:2] + [('compute2', 'disabled', 'up', None, False, None)]

    assert nova_api.keys_digest(same) == nova_api.keys_digest(keys)
    assert nova_api.keys_digest(moved) != nova_api.keys_digest(keys)
    assert nova_api.keys_digest(keys[:2]) != nova_api.keys_digest(keys)
    assert nova_api.keys_digest([('compute0', [1], 'up', None, False, None)]) is None


def test_keys_taken_from_another_process_hold_one_string_per_status_state_and_reason():
    keys = [(f'compute{i}', 'enabled', 'up', None, False, None) for i in range(4)] + [
        ('compute8', 'disabled', 'up', 'maintenance', False, None),
        ('compute9', 'disabled', 'down', 'maintenance', True, '2026-12-01T00:00:00.000000')]

    taken = nova_api.taken_keys(json.loads(json.dumps(keys)))

    assert taken == keys
    for field in ('status', 'state', 'disabled_reason'):
        i = nova_api.SERVICE_FIELDS.index(field)
        first: dict[object, object] = {}
        assert all(first.setdefault(key[i], key[i]) is key[i] for key in taken), field


def test_a_key_with_a_field_that_cannot_be_a_state_is_taken_as_it_came_and_refused():
    shipped = [['compute1', ['enabled'], 'up', None, False, None],
               ['compute2', 'enabled', 'up', None, False, None]]

    taken = nova_api.taken_keys(shipped)

    assert taken == [tuple(key) for key in shipped]
    with pytest.raises(NovaApiError):
        nova_api.ServicesParser().parse_keys(taken)


def test_the_service_hosts_of_an_answer_are_those_of_every_compute_record_it_decodes_to():
    rng = random.Random(9)
    hosts = [sys.intern(f'compute{i}') for i in range(10)] + ['compute0']
    held = {host: host for host in hosts}   # as the catalog's other sources hold them
    for _ in range(300):
        body = _tricky_read(rng, hosts)
        expected = {s['host'] for s in body['services'] if s['binary'] == 'nova-compute'}
        found = nova_api.service_hosts(_written(rng, body))
        assert found == expected
        assert all(host is held[host] for host in found)


@pytest.mark.parametrize('raw', [b'', b'[]', b'{"services": {}}', b'{"services": [1, 2]}',
                                 b'{"services": [{"binary": "nova-compute"}]}',
                                 b'{"services": [{"binary": "nova-compute", "host": 7}]}',
                                 b'not json at all'])
def test_an_answer_without_a_host_for_every_compute_record_is_an_error(raw):
    with pytest.raises(NovaApiError):
        nova_api.service_hosts(raw)


def test_only_the_records_that_changed_since_the_last_read_are_decoded(monkeypatch):
    services = [samples.compute_service(f'compute{i}') for i in range(50)]
    parser = nova_api.ServicesParser()
    parser.parse_raw_with_keys(json.dumps({'services': services}).encode())
    services[7] = dict(services[7], updated_at='2026-11-27T16:00:09.000000')
    services[9] = dict(services[9], status='disabled', disabled_reason='maintenance')
    decoded = []

    class CountingJson:
        @staticmethod
        def loads(data):
            decoded.append(data)
            return json.loads(data)

    monkeypatch.setattr(nova_api, 'json', CountingJson)
    states, _, _ = parser.parse_raw_with_keys(json.dumps({'services': services}).encode())
    records = [d for d in decoded if b'"host"' in d]
    assert sorted(json.loads(d)['host'] for d in records) == ['compute7', 'compute9']
    assert states['compute9'].disabled
    assert len(decoded) == len(records) + 1     # and the envelope's head, alone


@pytest.mark.parametrize('keys', [{'a': 1}, [['h', 'enabled', 'up']],
                                  [['h', 'enabled', 'sideways', None, False, None]]])
def test_malformed_keys_from_another_worker_are_an_error(keys):
    with pytest.raises(NovaApiError):
        nova_api.ServicesParser().parse_keys(keys)


@pytest.mark.parametrize('change', [{'forced_down': 1}, {'forced_down': 0},
                                    {'disabled_reason': ['a list']}])
def test_a_remembered_record_turned_malformed_is_still_an_error(change):
    """1 == True and 0 == False as dictionary keys: the remembered state must not
    stand in for a value _service would refuse."""
    parser = nova_api.ServicesParser()
    good = {'services': [samples.compute_service('h', forced_down=True),
                         samples.compute_service('g')]}
    parser.parse(good)
    bad = copy.deepcopy(good)
    bad['services'][0 if change.get('forced_down') == 1 else 1].update(change)
    with pytest.raises(NovaApiError, match=r'services\[\d\]'):
        parser.parse(bad)


def test_hypervisors_give_provider_uuid_nodename_service_host_and_host_facts():
    [node] = nova_api.parse_hypervisors({'hypervisors': [samples.HYPERVISOR_TEMPLATE]})
    assert node.provider_uuid == samples.NODE1
    assert (node.nodename, node.service_host) == ('compute1', 'compute1')
    assert (node.host_ip, node.hypervisor_type, node.hypervisor_version) == (
        '1.1.1.1', 'QEMU', 8002000)
    assert node.cpu_info['topology'] == {'cores': 1, 'threads': 1, 'sockets': 4}


def test_a_node_may_be_named_differently_from_its_service_host():
    doc = samples.hypervisor(samples.NODE2, 'ironic-node-7', 'ironic-conductor-1')
    [node] = nova_api.parse_hypervisors({'hypervisors': [doc]})
    assert (node.nodename, node.service_host) == ('ironic-node-7', 'ironic-conductor-1')


def test_cpu_info_as_the_pre_2_28_json_string_is_decoded():
    doc = samples.hypervisor(samples.NODE1, 'c', 'c', cpu_info='{"arch": "aarch64"}')
    assert nova_api.parse_hypervisors({'hypervisors': [doc]})[0].cpu_info == {'arch': 'aarch64'}


def test_null_host_facts_are_not_reported_rather_than_empty():
    doc = samples.hypervisor(samples.NODE1, 'c', 'c', host_ip=None, hypervisor_type=None,
                             hypervisor_version=None, cpu_info=None)
    [node] = nova_api.parse_hypervisors({'hypervisors': [doc]})
    assert (node.host_ip, node.hypervisor_type, node.hypervisor_version, node.cpu_info) == (
        None, None, None, {})


def test_an_integer_hypervisor_id_means_a_microversion_below_2_53():
    doc = dict(samples.HYPERVISOR_TEMPLATE, id=1)
    with pytest.raises(NovaApiError, match='2.53'):
        nova_api.parse_hypervisors({'hypervisors': [doc]})


def test_the_next_link_gives_the_marker_and_the_last_page_has_none():
    page = samples.hypervisors_page([samples.HYPERVISOR_TEMPLATE], next_marker=samples.NODE1)
    assert nova_api.next_hypervisor_marker(page) == samples.NODE1
    assert nova_api.next_hypervisor_marker(samples.hypervisors_page([])) is None
