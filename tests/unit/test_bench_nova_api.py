"""bench.nova_api: what is not Nova's in the nova-api it runs, and the rows it seeds."""
import configparser
import json
import time

import pytest

from bench import nova_api
from bench.host_data import _service_rows, node_stats, nova_documents
from bench.synthetic import make_cloud

NOVA_PASTE = """[composite:openstack_compute_api_v21]
use = call:nova.api.auth:pipeline_factory_v21
keystone = cors http_proxy_to_wsgi compute_req_id faultwrap request_log sizelimit osprofiler \
authtoken keystonecontext osapi_compute_app_v21

[composite:openstack_compute_api_v21_legacy_v2_compatible]
use = call:nova.api.auth:pipeline_factory_v21
keystone = cors authtoken keystonecontext legacy_v2_compatible osapi_compute_app_v21

[filter:authtoken]
paste.filter_factory = keystonemiddleware.auth_token:filter_factory
"""


def _pipelines(text):
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    return parser, [parser[s]['keystone'].split() for s in parser.sections()
                    if 'keystone' in parser[s]]


def test_the_paste_config_is_novas_with_authtoken_replaced_and_nothing_else():
    parser, pipelines = _pipelines(nova_api.paste_ini(NOVA_PASTE, 'secret'))
    _, novas = _pipelines(NOVA_PASTE)
    assert pipelines == [[f if f != 'authtoken' else 'benchauth' for f in p] for p in novas]
    assert parser['filter:benchauth']['paste.filter_factory'] == (
        'bench.nova_api:auth_filter_factory')
    assert parser['filter:benchauth']['token'] == 'secret'


def test_a_paste_config_without_authtoken_is_refused():
    text = NOVA_PASTE.replace(' authtoken', '')
    try:
        nova_api.paste_ini(text, 'secret')
    except RuntimeError as e:
        assert 'authtoken' in str(e)
    else:
        raise AssertionError('a pipeline without authtoken was taken')


def _call(token):
    seen = {}

    def app(environ, start_response):
        seen.update(environ)
        start_response('200 OK', [])
        return [b'{}']

    statuses = []
    body = nova_api.auth_filter_factory({}, token='secret')(app)(
        {'HTTP_X_AUTH_TOKEN': token} if token else {}, lambda s, h: statuses.append(s))
    return statuses[0], b''.join(body), seen


def test_the_bench_token_reaches_nova_as_a_confirmed_project_admin():
    status, _, environ = _call('secret')
    assert status == '200 OK'
    assert environ['HTTP_X_IDENTITY_STATUS'] == 'Confirmed'
    assert 'admin' in environ['HTTP_X_ROLES'].split(',')
    assert environ['HTTP_X_USER_ID'] and environ['HTTP_X_PROJECT_ID']


def test_any_other_token_gets_a_401_and_never_reaches_nova():
    for token in ('wrong', None):
        status, body, environ = _call(token)
        assert status.startswith('401')
        assert environ == {}
        assert json.loads(body)['error']['code'] == 401


def test_answers_are_timed_per_path_and_per_phase_label(tmp_path):
    def app(environ, start_response):
        start_response('200 OK', [])
        return [b'{"path": "', environ['PATH_INFO'].encode(), b'"}']

    timed = nova_api._Timed(app, tmp_path)
    bodies = [b''.join(timed({'PATH_INFO': path}, lambda s, h: None))
              for path in ('/p-nova/v2.1/os-services', '/v2.1/os-services', '/v2.1/os-aggregates')]
    # Nova sees the path without the label.
    assert json.loads(bodies[0])['path'] == '/v2.1/os-services'
    stats = nova_api.read_stats(tmp_path)
    assert {k: v[0] for k, v in stats.items()} == {
        '/v2.1/os-services': 2, '/p-nova/v2.1/os-services': 1, '/v2.1/os-aggregates': 1}
    assert all(seconds >= 0 for _, seconds in stats.values())


def test_the_api_database_maps_every_compute_and_holds_the_clouds_aggregates():
    cloud = make_cloud(60)
    rows = nova_api._api_rows(cloud, cell_mapping_id=7)
    document = cloud.hosts_document()
    assert rows['hosts'] == [(h['service_host'], 7) for h in document['hosts']]
    assert sorted(a[1] for a in rows['aggregates']) == sorted(
        a['uuid'] for a in document['aggregates'])
    assert len(rows['members']) == sum(len(a['hosts']) for a in document['aggregates'])
    assert len(rows['metadata']) == sum(len(a['metadata']) for a in document['aggregates'])


def test_the_cell_rows_and_the_stand_in_agree_on_who_reports():
    # A forced-down compute is fenced: no heartbeat in the rows, none in the stand-in's
    # answers, so nova-api and the stand-in show it with the same updated_at.
    cloud = make_cloud(1000)  # 3 forced down, 9 disabled
    services = {s['host']: s for s in nova_documents(cloud)['services']}
    rows = {row[2]: row for row in _service_rows(cloud)}
    assert services.keys() == rows.keys()
    for host, (_, _, _, reports, disabled, _, forced_down, _, uuid) in rows.items():
        assert uuid == services[host]['id']
        assert disabled == (services[host]['status'] == 'disabled')
        if forced_down or services[host]['state'] == 'down':
            assert reports == 0, host
        else:
            assert reports == 1, host
    assert any(r[6] for r in rows.values()), 'the cloud has no forced-down compute to test'


def test_the_cell_rows_stats_say_what_the_hosts_file_says_beside_nova_compute_s_counters():
    from scheduler.catalog.cell_db import kept_stats

    cloud = make_cloud(200)
    document = {h['nodename']: h for h in cloud.hosts_document()['hosts']}
    busy = 0
    for index, host in enumerate(cloud.hosts):
        stats = node_stats(host, index)
        assert kept_stats(stats) == document[host.name]['stats']
        by_project = [int(v) for k, v in stats.items() if k.startswith('num_proj_')]
        assert sum(by_project) == host.num_instances
        busy += len(by_project) > 1
    assert busy, 'no compute runs instances of several projects'


def test_the_host_data_phases_can_be_left_out_by_letter_but_never_the_baseline():
    from bench.host_data import PHASES, Settings, _phases

    assert _phases(Settings()) == [p for p in PHASES if p != 'cell']
    assert _phases(Settings(skip='bgh')) == ['baseline', 'nova+cell', 'nova, max_age -1',
                                             'nova+cell, no hosts file']
    assert _phases(Settings(skip='bdghi')) == ['baseline', 'nova+cell']
    assert _phases(Settings(max_age=5, skip='f')) == _phases(Settings())
    for bad in ('a', 'x'):
        with pytest.raises(SystemExit, match='the baseline, a, is always run'):
            _phases(Settings(skip=bad))


def test_requests_started_and_not_answered_are_in_flight_per_path_and_label(tmp_path):
    seen = []

    def app(environ, start_response):
        # While Nova answers, the request is in flight under both its keys.
        seen.append(nova_api.read_in_flight(tmp_path))
        start_response('200 OK', [])
        return [b'{}']

    timed = nova_api._Timed(app, tmp_path)
    b''.join(timed({'PATH_INFO': '/p-nova/v2.1/os-services'}, lambda s, h: None))
    assert seen == [{'/v2.1/os-services': 1, '/p-nova/v2.1/os-services': 1}]
    assert nova_api.read_in_flight(tmp_path) == {
        '/v2.1/os-services': 0, '/p-nova/v2.1/os-services': 0}
    # The answers read as before the requests started were counted.
    assert {k: v[0] for k, v in nova_api.read_stats(tmp_path).items()} == {
        '/v2.1/os-services': 1, '/p-nova/v2.1/os-services': 1}


def test_a_request_that_raises_is_neither_answered_nor_left_in_flight(tmp_path):
    def app(environ, start_response):
        raise RuntimeError('nova failed')

    timed = nova_api._Timed(app, tmp_path)
    with pytest.raises(RuntimeError):
        timed({'PATH_INFO': '/v2.1/os-services'}, lambda s, h: None)
    assert nova_api.read_in_flight(tmp_path) == {'/v2.1/os-services': 0}
    assert nova_api.read_stats(tmp_path) == {}


def test_the_stand_in_counts_what_it_has_not_answered_yet_as_nova_api_does():
    import threading
    import urllib.request

    from bench.host_data import PreSerialisedNova

    nova = PreSerialisedNova(token='token').start()
    base = nova.url.rsplit('/v2.1', 1)[0]
    release, answer_bytes = threading.Event(), nova.answer_bytes

    def slow(raw_path, headers):
        if 'os-services' in raw_path:
            release.wait(30)
        return answer_bytes(raw_path, headers)

    nova.answer_bytes = slow
    request = urllib.request.Request(
        f'{base}/p-c/v2.1/os-services?binary=nova-compute',
        headers={'X-Auth-Token': 'token', 'OpenStack-API-Version': 'compute 2.87'})
    reader = threading.Thread(target=lambda: urllib.request.urlopen(request, timeout=30).read())
    reader.start()
    try:
        deadline = time.monotonic() + 10
        while nova.in_flight().get('/p-c/v2.1/os-services') != 1:
            assert time.monotonic() < deadline, nova.in_flight()
            time.sleep(0.01)
        served = json.loads(urllib.request.urlopen(f'{base}/_in_flight', timeout=10).read())
        assert served['/p-c/v2.1/os-services'] == 1 and served['/v2.1/os-services'] == 1
    finally:
        release.set()
        reader.join(30)
        nova.stop()
    assert nova.in_flight()['/p-c/v2.1/os-services'] == 0
    assert nova.stats['/p-c/v2.1/os-services'][0] == 1


def test_a_start_up_check_is_answered_once_a_get_came_back_and_none_is_on_the_way():
    from bench.host_data import CHECKING_PHASES, PHASES, _check_state, _label

    assert CHECKING_PHASES == {'nova+cell', 'nova+cell, scan per request',
                               'nova+cell, no hosts file'} <= set(PHASES)
    key = f'/{_label("nova+cell")}/v2.1/os-services'

    class Api:
        def __init__(self, answered, in_flight):
            self._stats = {key: [answered, 2.5 * answered]} if answered else {}
            self._in_flight = {key: in_flight}

        def stats(self):
            return self._stats

        def in_flight(self):
            return self._in_flight

    assert not _check_state(Api(0, 0), 'nova+cell').answered   # not sent yet
    assert not _check_state(Api(0, 1), 'nova+cell').answered
    assert not _check_state(Api(1, 1), 'nova+cell').answered   # sent again
    check = _check_state(Api(1, 0), 'nova+cell')
    assert check.answered and (check.gets, check.seconds) == (1, 2.5)


def test_a_start_up_check_in_words_says_its_cost_and_whether_the_window_has_it():
    from bench.host_data import StartupCheck, _check_note

    assert _check_note(StartupCheck(1, 19.43, 83.21, 0)) == (
        "start-up check: 1 GET, 19.4 s of the compute API's own, answered before the "
        'window (the clients ran 83.2 s past the warm-up for it)')
    assert _check_note(StartupCheck(1, 0.00018, 0.0, 0)).startswith(
        "start-up check: 1 GET, 0.00018 s of the compute API's own, answered before")
    assert _check_note(StartupCheck(21, 1880.3, 904.6, 2)) == (
        "start-up check: 21 GETs, 1880.3 s of the compute API's own (89.5 s each), "
        'answered, and 2 still in flight when the window began, 904.6 s past the warm-up '
        '(at most 900 s): the window has it')
