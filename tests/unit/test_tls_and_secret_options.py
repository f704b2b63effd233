"""TLS towards Placement is keystoneauth's, from ``[placement]``; secret options are secret.

The ``[placement]`` TLS options (cafile, certfile, keyfile, insecure) are
keystoneauth1's session options, loaded exactly as Nova loads them: these tests
show they reach the session the client uses, and that a real TLS handshake on
loopback succeeds with the right CA and fails, without retries, without it.
"""
from __future__ import annotations

import json
import re
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import oslo_messaging.opts
import pytest
from keystoneauth1 import loading as ks_loading

from placement_client.client import PlacementClient
from placement_client.exceptions import PlacementUnavailable
from scheduler.conf import opts as scheduler_opts
from tests.fixtures.placement import make_placement_conf


def _client(endpoint: str = 'https://127.0.0.1:9', **placement: object) -> PlacementClient:
    conf = make_placement_conf(endpoint)
    conf.set_override('max_retries', 2, group='placement')
    for name, value in placement.items():
        conf.set_override(name, value, group='placement')
    return PlacementClient.from_conf(conf)


def _session(client: PlacementClient):
    return client._adapter.session   # noqa: SLF001 - what keystoneauth will use


# ------------------------------------------------------------ options -> session


def test_cafile_reaches_the_keystoneauth_session():
    assert _session(_client(cafile='/etc/ssl/placement-ca.pem')).verify == \
        '/etc/ssl/placement-ca.pem'


def test_certfile_and_keyfile_are_the_client_certificate():
    session = _session(_client(certfile='/etc/ssl/sched.crt', keyfile='/etc/ssl/sched.key'))
    assert session.cert == ('/etc/ssl/sched.crt', '/etc/ssl/sched.key')


def test_insecure_turns_verification_off_and_verification_is_on_by_default(monkeypatch):
    # requests' own CA bundle variables would stand for True (test_placement_client.py).
    monkeypatch.delenv('REQUESTS_CA_BUNDLE', raising=False)
    monkeypatch.delenv('CURL_CA_BUNDLE', raising=False)
    assert _session(_client(insecure=True)).verify is False
    assert _session(_client()).verify is True


# ----------------------------------------------------- a real handshake, loopback


@pytest.fixture(scope='module')
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    if shutil.which('openssl') is None:
        pytest.skip('openssl is needed to make a certificate for the loopback TLS server')
    directory = tmp_path_factory.mktemp('tls')
    cert, key = directory / 'cert.pem', directory / 'key.pem'
    subprocess.run(['openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1',
                    '-keyout', str(key), '-out', str(cert), '-subj', '/CN=127.0.0.1',
                    '-addext', 'subjectAltName=IP:127.0.0.1'],
                   check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.fixture
def tls_placement(certificate) -> Iterator[str]:
    """A loopback HTTPS server answering Placement's version document."""
    cert, key = certificate

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format, *args):  # noqa: A002 - stdlib signature
            pass

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            body = json.dumps({'versions': [{'id': 'v1.0', 'max_version': '1.39',
                                             'min_version': '1.0', 'status': 'CURRENT',
                                             'links': []}]}).encode()
            self.send_response(200)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = HTTPServer(('127.0.0.1', 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert), str(key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.05},
                              daemon=True)
    thread.start()
    yield f'https://127.0.0.1:{server.server_address[1]}'
    server.shutdown()
    server.server_close()


def test_placement_over_tls_is_reached_with_the_configured_cafile(tls_placement, certificate):
    cert, _ = certificate
    assert _client(tls_placement, cafile=str(cert)).negotiate() == '1.39'


def test_an_unverifiable_certificate_is_a_tls_error_and_is_not_retried(tls_placement):
    with pytest.raises(PlacementUnavailable, match='TLS error') as failure:
        _client(tls_placement).negotiate()
    assert failure.value.attempts == 1


# ------------------------------------------------------------------ secret options

_SECRET_NAME = re.compile(r'password|secret|token|transport_url|connection$|credential')
# Options whose names match but hold no secret: endpoints, names, ids, types.
_NOT_SECRETS = {'access_token_endpoint', 'access_token_type', 'application_credential_id',
                'application_credential_name', 'idp_otp_key'}
# oslo.messaging's kafka driver (notifications only; this service sends none).
_UNUSED_GROUPS = {'oslo_messaging_kafka'}


def _options_this_service_registers():
    for group, options in scheduler_opts.list_opts():
        yield str(group), options
    for group, options in oslo_messaging.opts.list_opts():
        if group not in _UNUSED_GROUPS:
            yield str(group), options
    # [placement] takes the options of whichever keystoneauth plugin auth_type names.
    for plugin in ks_loading.get_available_plugin_names():
        yield f'placement ({plugin})', ks_loading.get_auth_plugin_conf_options(plugin)


def test_every_option_holding_a_secret_is_marked_secret():
    checked = []
    for group, options in _options_this_service_registers():
        for opt in options:
            if _SECRET_NAME.search(opt.dest) and opt.dest not in _NOT_SECRETS:
                checked.append(f'[{group}] {opt.dest}')
                assert opt.secret, f'[{group}] {opt.dest} holds a secret but is not secret=True'
    # The ones this service is documented to read are among those checked.
    for expected in ('[None] transport_url', '[placement (password)] password',
                     '[placement (admin_token)] token'):
        assert expected in checked
