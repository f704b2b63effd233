"""Put this service in nova-scheduler's place inside Nova's own functional tests.

Installed into a process that runs Nova's tests (``run_module``), before any of
them starts. Nothing here changes how the product behaves; it only wires a
Nova test's fixtures to the service the way an operator's configuration file
would:

* ``start_service('scheduler')`` starts :class:`scheduler.service.SchedulerService`
  in-process, from a configuration file written for this test, on Nova's own
  RPC transport (``nova.rpc.TRANSPORT``: the fake driver, one bus per process);
* ``[placement]`` points at one address, behind which the test's current
  ``PlacementFixture`` answers (wsgi-intercept, noauth2, token ``admin``), as a load
  balancer in front of Placement would (:func:`_placement`): a test may start the
  scheduler before its PlacementFixture, replace it, or have none (Placement is then
  down; nova-scheduler's report client finds no endpoint and answers NoValidHost);
* ``[nova]`` points at the test's compute API (``OSAPIFixture``) behind a
  stand-in for Keystone (:func:`_keystone_emulation`);
* ``[neutron]`` points at Neutron's API as the test's ``NeutronFixture`` would
  answer it (:func:`_neutron_api`: Nova reads that fixture in-process);
* ``[cell_database]`` reads the test's cell databases (file-backed SQLite in
  Nova's threading mode), each value naming its cell;
* the values of Nova's ``[scheduler]``, ``[filter_scheduler]``, ``[workarounds]``
  and ``[pci]`` options that the test set are applied to ours, at start and on
  every later ``self.flags(...)``.

Two things make the fake bus and the fixtures behave like the real ones for both
schedulers alike (:func:`install_common`): a failure crosses the bus serialised,
as every real driver sends it, and the API's paste file is found.
"""
from __future__ import annotations

import logging
import os
import pathlib
import tempfile
import textwrap
from typing import Any

LOG = logging.getLogger(__name__)

#: Set by ``run_module --filter-map`` (a diagnostic; see SwappedScheduler.manager).
FILTER_MAP = False

#: Nova option groups whose test values this service must see.
MIRRORED_GROUPS = ('scheduler', 'filter_scheduler', 'workarounds', 'pci')
#: Options of ``[DEFAULT]`` an operator sets alike for Nova and the scheduler, mirrored too
#: (``host`` and ``state_path`` are the service's own).
MIRRORED_DEFAULTS = ('default_availability_zone',)

#: The identity the Keystone stand-in gives the scheduler's token.
SCHEDULER_TOKEN = 'scheduler-service-token'
_KEYSTONE_IDENTITY = {'HTTP_X_AUTH_USER': 'admin', 'HTTP_X_AUTH_PROJECT_ID': 'service',
                      'HTTP_X_ROLES': 'admin,member,reader'}
_API_HOST = 'nova-api.harness-keystone'
_NEUTRON_HOST = 'neutron.harness-keystone'
_PLACEMENT_HOST = 'placement.harness'


class _TestWiring:
    """What the current test's fixtures set up, found as they set it up (one test runs
    at a time in a process; the service reads it from its own threads)."""

    placement_endpoint: str | None = None
    api_app: Any = None
    #: The test's latest NeutronFixture (tests replace the base one after start).
    neutron: Any = None
    cell_database_urls: dict[str, str]

    def __init__(self) -> None:
        self.cell_database_urls = {}


_WIRING = _TestWiring()


def install_common() -> None:
    """Both sides: a fake bus that carries what a real one carries; Nova's api-paste.ini."""
    import nova.rpc
    from oslo_messaging._drivers import common as rpc_common
    from oslo_messaging._drivers import impl_fake
    from oslo_serialization import jsonutils

    def over_the_wire(value: Any) -> Any:
        # Every real driver sends JSON: tuples arrive as lists, objects as primitives.
        return jsonutils.loads(jsonutils.dumps(value))

    def reply(self: Any, reply: Any = None, failure: Any = None) -> None:
        if not self._reply_q:
            return
        if failure:
            # A real driver sends the failure as data and the caller rebuilds it from
            # its allowed_remote_exmods; the fake driver hands over the object itself.
            data = rpc_common.serialize_remote_exception(failure)
            rebuilt = rpc_common.deserialize_remote_exception(
                data, nova.rpc.get_allowed_exmods())
            self._reply_q.put((over_the_wire(reply), rebuilt))
            return
        self._reply_q.put((over_the_wire(reply), None))

    original_send = impl_fake.FakeDriver._send

    def send(self: Any, target: Any, ctxt: Any, message: Any, *args: Any, **kwargs: Any) -> Any:
        # The context stays as it is: Nova's fixtures put in-process database
        # handles into it, which a real deployment's contexts never carry.
        return original_send(self, target, ctxt, over_the_wire(message), *args, **kwargs)

    impl_fake.FakeIncomingMessage.reply = reply
    impl_fake.FakeDriver._send = send
    _link_api_paste()


def _link_api_paste() -> None:
    # Nova's ConfFixture looks next to the package (site-packages/etc/nova); the
    # wheel installs the file under the environment's etc/nova.
    import sys

    import nova
    site_etc = pathlib.Path(nova.__file__).resolve().parent.parent / 'etc' / 'nova'
    if (site_etc / 'api-paste.ini').exists():
        return
    installed = pathlib.Path(sys.prefix) / 'etc' / 'nova'
    if not (installed / 'api-paste.ini').exists():
        raise RuntimeError(f'api-paste.ini is neither in {site_etc} nor in {installed}')
    site_etc.parent.mkdir(parents=True, exist_ok=True)
    try:
        site_etc.symlink_to(installed, target_is_directory=True)
    except FileExistsError:
        # Test processes started together race to make the link: another made it.
        if not (site_etc / 'api-paste.ini').exists():
            raise


def install_swap() -> None:
    """Our side: record the fixtures' endpoints and swap the scheduler service."""
    import nova.test
    from nova.tests import fixtures as nova_fixtures
    from placement.tests.functional.fixtures import placement as placement_fixtures
    from wsgi_intercept import interceptor

    original_placement_setup = placement_fixtures.PlacementFixture.setUp

    def placement_setup(fixture: Any) -> None:
        original_placement_setup(fixture)
        _WIRING.placement_endpoint = getattr(fixture, 'endpoint', None)

    placement_fixtures.PlacementFixture.setUp = placement_setup

    original_api_setup = nova_fixtures.OSAPIFixture.setUp

    def api_setup(fixture: Any) -> None:
        original_api_setup(fixture)
        from nova.api import wsgi
        app = _keystone_emulation(wsgi.Loader().load_app('osapi_compute'))
        intercept = interceptor.RequestsInterceptor(lambda: app, host=_API_HOST, port=80)
        intercept.install_intercept()
        fixture.addCleanup(intercept.uninstall_intercept)
        _WIRING.api_app = app

    nova_fixtures.OSAPIFixture.setUp = api_setup

    original_neutron_setup = nova_fixtures.NeutronFixture.setUp

    def neutron_setup(fixture: Any) -> None:
        original_neutron_setup(fixture)
        _WIRING.neutron = fixture

    nova_fixtures.NeutronFixture.setUp = neutron_setup
    neutron = interceptor.RequestsInterceptor(lambda: _neutron_api, host=_NEUTRON_HOST, port=80)
    neutron.install_intercept()
    placement = interceptor.RequestsInterceptor(
        lambda: _placement, url=f'http://{_PLACEMENT_HOST}:80/placement')
    placement.install_intercept()

    original_add_cell = nova_fixtures.CellDatabases.add_cell_database

    def add_cell_database(fixture: Any, connection_str: str, default: bool = False) -> None:
        original_add_cell(fixture, connection_str, default)
        engine = fixture._ctxt_mgrs[connection_str].writer.get_engine()
        if engine.url.get_backend_name() == 'sqlite' and engine.url.database:
            _WIRING.cell_database_urls[connection_str] = engine.url.render_as_string(
                hide_password=False)

    nova_fixtures.CellDatabases.add_cell_database = add_cell_database

    original_start_service = nova.test.TestCase.start_service
    original_flags = nova.test.TestCase.flags
    original_setup = nova.test.TestCase.setUp

    def setup(test: Any) -> None:
        _WIRING.placement_endpoint = None
        _WIRING.api_app = None
        _WIRING.neutron = None
        _WIRING.cell_database_urls = {}
        test._placement_scheduler = None
        original_setup(test)

    def start_service(test: Any, name: str, host: str | None = None,
                      cell_name: str | None = None, **kwargs: Any) -> Any:
        if name != 'scheduler':
            return original_start_service(test, name, host=host, cell_name=cell_name,
                                          **kwargs)
        if test._service_fixture_count[name]:
            raise nova.test.TestingException('Duplicate start_service(scheduler)!')
        service = SwappedScheduler(test, host or 'scheduler')
        service.start()
        test.addCleanup(service.kill)
        test._service_fixture_count[name] += 1
        test._placement_scheduler = service
        return service

    def flags(test: Any, **kw: Any) -> None:
        original_flags(test, **kw)
        service = getattr(test, '_placement_scheduler', None)
        if service is not None and service.running:
            service.mirror_nova_options()

    nova.test.TestCase.setUp = setup
    nova.test.TestCase.start_service = start_service
    nova.test.TestCase.flags = flags


def _keystone_emulation(app: Any) -> Any:
    """Keystone's part for the scheduler's token: the identity it stands for.

    Nova's OSAPIFixture replaces keystonemiddleware with a reader of test
    headers; a real client sends a token and Keystone says who that is. Only
    the scheduler's token is known; every other request passes unchanged.
    """
    def keystone(environ: dict, start_response: Any) -> Any:
        if environ.get('HTTP_X_AUTH_TOKEN') == SCHEDULER_TOKEN:
            environ = {**environ, **_KEYSTONE_IDENTITY}
        return app(environ, start_response)
    return keystone


def _placement(environ: dict, start_response: Any) -> Any:
    """Placement at the address the scheduler is configured with: the app of the test's
    current PlacementFixture (its own wsgi-intercept), or, while there is none (not yet,
    no more, or never: a boot that is to fail with no compute to go to), down, as a load
    balancer with no backend answers."""
    from urllib.parse import urlsplit

    import wsgi_intercept
    entry = None
    if _WIRING.placement_endpoint:
        url = urlsplit(_WIRING.placement_endpoint)
        entry = wsgi_intercept._wsgi_intercept.get((url.hostname, url.port or 80))
    if entry is None:
        start_response('503 Service Unavailable', [('Content-Type', 'text/plain')])
        return [b'no Placement in this test']
    app_factory, _script_name = entry
    return app_factory()(environ, start_response)


def _neutron_api(environ: dict, start_response: Any) -> Any:
    """Neutron's API for the GETs the routed networks filter sends, answered from the
    test's NeutronFixture (Nova's stand-in for Neutron, which Nova reads in-process)."""
    import json
    from urllib.parse import parse_qs

    def answer(status: str, body: Any) -> list[bytes]:
        start_response(status, [('Content-Type', 'application/json')])
        return [json.dumps(body).encode()]

    if environ.get('HTTP_X_AUTH_TOKEN') != SCHEDULER_TOKEN:
        return answer('401 Unauthorized', {'error': 'no token Keystone knows'})
    fixture = _WIRING.neutron
    path = environ.get('PATH_INFO', '').rstrip('/')
    query = {k: v[0] for k, v in parse_qs(environ.get('QUERY_STRING', '')).items()}
    if fixture is None or environ.get('REQUEST_METHOD') != 'GET':
        return answer('503 Service Unavailable', {'error': 'no Neutron in this test'})
    try:
        if path == '/v2.0/extensions':
            return answer('200 OK', fixture.list_extensions())
        if path.startswith('/v2.0/ports/'):
            return answer('200 OK', fixture.show_port(path.rsplit('/', 1)[1]))
        if path.startswith('/v2.0/subnets/'):
            return answer('200 OK', fixture.show_subnet(path.rsplit('/', 1)[1]))
        if path == '/v2.0/subnets':
            params = {'network_id': query['network_id']} if 'network_id' in query else {}
            return answer('200 OK', fixture.list_subnets(**params))
    except Exception as e:  # noqa: BLE001 - the fixture's "not found" exceptions
        return answer('404 Not Found', {'NeutronError': {'message': str(e)}})
    return answer('404 Not Found', {'NeutronError': {'message': f'no route {path}'}})


class SwappedScheduler:
    """This service where a Nova test expects ``nova.service.Service('scheduler')``."""

    def __init__(self, test: Any, host: str):
        self._test = test
        self.host = host
        self.service: Any = None
        self.running = False
        self._conf: Any = None
        self._dir = tempfile.mkdtemp(prefix='placement-scheduler-nova-functional-')
        test.addCleanup(_remove_tree, self._dir)

    @property
    def manager(self) -> Any:
        """Only with ``--filter-map`` (a diagnostic): Nova's filter classes where the
        libvirt NUMA and PCI test classes look for them in setUp, so that those tests
        run against this service. Their assertions on the mock of Nova's own filter
        then fail, and every other assertion says something about this service."""
        if not FILTER_MAP:
            raise AttributeError('manager: nova-scheduler\'s manager does not run here')
        import types

        from nova.scheduler.filters import numa_topology_filter, pci_passthrough_filter
        return types.SimpleNamespace(host_manager=types.SimpleNamespace(filter_cls_map={
            'NUMATopologyFilter': numa_topology_filter.NUMATopologyFilter,
            'PciPassthroughFilter': pci_passthrough_filter.PciPassthroughFilter}))

    # What Nova's tests call on a service ------------------------------------------------
    def start(self) -> None:
        import nova.rpc

        from scheduler import conf as scheduler_conf
        from scheduler.service import SchedulerService

        path = self._write_config()
        self._conf = scheduler_conf.parse_args(['--config-file', path],
                                               default_config_files=[])
        self.mirror_nova_options()
        self.service = SchedulerService(self._conf, transport=nova.rpc.TRANSPORT)
        self.service.start()
        self.running = True

    def stop(self) -> None:
        if self.running:
            self.running = False
            self.service.stop()
            self.service.wait()
            self._test._service_fixture_count['scheduler'] -= 1

    def kill(self) -> None:
        self.stop()

    # Configuration ---------------------------------------------------------------------
    def _write_config(self) -> str:
        cells = self._cell_connections()
        nova_section = ''
        if _WIRING.api_app is not None:
            nova_section = textwrap.dedent(f"""\
                [nova]
                auth_type = admin_token
                token = {SCHEDULER_TOKEN}
                endpoint = http://{_API_HOST}:80/v2.1
                sync_interval = 60
                """)
        neutron_section = textwrap.dedent(f"""\
            [neutron]
            auth_type = admin_token
            token = {SCHEDULER_TOKEN}
            endpoint = http://{_NEUTRON_HOST}:80
            """)
        cell_lines = ''.join(f'connections = {c}\n' for c in cells)
        cell_section = (f'[cell_database]\n{cell_lines}sync_interval = 60\n'
                        if cells else '')
        text = textwrap.dedent(f"""\
            [DEFAULT]
            host = {self.host}
            state_path = {self._dir}

            [scheduler]
            default_cell_uuid = {self._default_cell_uuid()}
            # A drop-in keeps nova-scheduler's words in the instance fault (tests
            # compare them); the explained form is this service's default.
            no_valid_host_reason = nova

            [placement]
            auth_type = admin_token
            token = admin
            endpoint = http://{_PLACEMENT_HOST}:80/placement
            max_retries = 1
            retry_backoff = 0.01

            """) + nova_section + '\n' + neutron_section + '\n' + cell_section
        path = os.path.join(self._dir, 'scheduler.conf')
        with open(path, 'w') as f:
            f.write(text)
        return path

    def _cell_connections(self) -> list[str]:
        mappings = getattr(self._test, 'cell_mappings', {}) or {}
        values = []
        for mapping in mappings.values():
            url = _WIRING.cell_database_urls.get(mapping.database_connection)
            if url is not None and mapping.uuid != _cell0_uuid():
                values.append(f'{mapping.uuid}={url}')
        return values

    def _default_cell_uuid(self) -> str:
        mappings = getattr(self._test, 'cell_mappings', {}) or {}
        cell1 = mappings.get('cell1')
        return cell1.uuid if cell1 is not None else '00000000-0000-0000-0000-000000000001'

    def mirror_nova_options(self) -> None:
        """Nova's current values of the mirrored groups, set on ours."""
        from nova import conf as nova_conf
        from oslo_config import cfg
        nova_cfg = nova_conf.CONF
        for name in MIRRORED_DEFAULTS:
            self._conf.set_override(name, nova_cfg[name])
        for group in MIRRORED_GROUPS:
            ours = self._conf[group]
            for name in list(ours.keys()):
                try:
                    value = nova_cfg[group][name]
                except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
                    continue  # an option of ours Nova does not have
                try:
                    self._conf.set_override(name, value, group)
                except (ValueError, TypeError) as e:
                    raise RuntimeError(f'[{group}] {name} = {value!r}: {e}') from e


def _cell0_uuid() -> str:
    from nova.objects import cell_mapping
    return cell_mapping.CellMapping.CELL0_UUID


def _remove_tree(path: str) -> None:
    import shutil
    shutil.rmtree(path, ignore_errors=True)
