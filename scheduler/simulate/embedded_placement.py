"""A real OpenStack Placement (``openstack-placement``), served in-process.

Used by ``scheduler-manage simulate`` and by the functional tests: the real
Placement WSGI application on sqlite, behind real HTTP on 127.0.0.1, so the
scheduler talks to it exactly as it talks to a production Placement.

sqlite cannot take concurrent writers (oslo.db's deferred ``BEGIN`` makes two
writers fail with "database is locked", WAL or not), so the
server handles one request at a time; concurrent clients queue in the listen
backlog. Placement configures its database once per process, so there is one
embedded Placement database per process; the server itself can be stopped and
started again on the same port to simulate an outage.
"""
from __future__ import annotations

import logging
import os
import sqlite3
import tempfile
import threading
from typing import TYPE_CHECKING
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

if TYPE_CHECKING:
    # typeshed's name for it on every Python version (wsgiref.types is 3.11+)
    from _typeshed.wsgi import WSGIApplication

LOG = logging.getLogger(__name__)

_APP_LOCK = threading.Lock()
_APP: tuple[WSGIApplication, str] | None = None   # (wsgi app, sqlite path): one per process

# Tables emptied by wipe(), children first.
_WIPE_TABLES = (
    'allocations', 'consumers', 'inventories', 'resource_provider_traits',
    'resource_provider_aggregates', 'resource_providers', 'placement_aggregates',
    'projects', 'users',
)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - stdlib signature
        LOG.debug('placement: ' + format, *args)


def _load_app(db_dir: str | None) -> tuple[WSGIApplication, str]:
    global _APP
    with _APP_LOCK:
        if _APP is not None:
            return _APP
        try:
            from oslo_config import cfg
            from placement import conf as placement_conf
            from placement import deploy
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise RuntimeError(
                'the embedded Placement needs the openstack-placement package: '
                'pip install "placement-scheduler[placement]"') from exc
        db_dir = db_dir or tempfile.mkdtemp(prefix='embedded-placement-')
        db_path = os.path.join(db_dir, 'placement.db')
        conf = cfg.ConfigOpts()
        placement_conf.register_opts(conf)
        conf.set_override('auth_strategy', 'noauth2', group='api')
        conf.set_override('connection', f'sqlite:///{db_path}', group='placement_database')
        conf.set_override('sync_on_startup', True, group='placement_database')
        conf.set_override('sqlite_synchronous', False, group='placement_database')
        conf([], project='placement', default_config_files=[], default_config_dirs=[])
        # Placement logs every request at INFO; that is noise inside a simulation.
        for name in ('placement', 'placement.requestlog', 'oslo_db', 'alembic',
                     'keystonemiddleware', 'oslo_policy'):
            logging.getLogger(name).setLevel(logging.WARNING)
        _APP = (deploy.loadapp(conf), db_path)
        return _APP


class EmbeddedPlacement:
    """Real Placement on ``http://127.0.0.1:<port>``; ``stop()``/``start()`` keep the port.

    Authentication is ``noauth2``: clients reach it with keystoneauth1's
    ``admin_token`` plugin and the token ``admin``, as an operator would.
    """

    def __init__(self, port: int = 0, db_dir: str | None = None):
        self._app, self.db_path = _load_app(db_dir)
        self._port = port
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f'http://127.0.0.1:{self._port}'

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> EmbeddedPlacement:
        if self._server is not None:
            return self
        server = make_server('127.0.0.1', self._port, self._app, handler_class=_QuietHandler)
        self._port = server.server_port
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.05},
                                        name=f'placement-{self._port}', daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop answering: new connections are refused until start()."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def wipe(self) -> None:
        """Delete every provider, aggregate and allocation (traits and classes stay)."""
        con = sqlite3.connect(self.db_path, timeout=30)
        try:
            with con:
                for table in _WIPE_TABLES:
                    con.execute(f'DELETE FROM {table}')  # noqa: S608 - fixed names
        finally:
            con.close()

    def __enter__(self) -> EmbeddedPlacement:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
