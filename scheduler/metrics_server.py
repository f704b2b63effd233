"""The ``/metrics`` endpoint of one worker: a stdlib HTTP server on a thread.

With several workers each one listens on ``port + worker index`` (worker 0 on
the configured port): every worker is its own scrape target, and Prometheus
adds them up (``sum by (job)``). A restarted worker takes the index, and so
the port, of the one it replaces; its counters start at zero again, which
``rate()`` and ``increase()`` treat as a counter reset. Port 0 lets the kernel
choose a free port per worker; the chosen one is logged and is
:attr:`MetricsServer.port`.
"""
from __future__ import annotations

import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from scheduler import metrics
from scheduler.exceptions import ConfigurationError

LOG = logging.getLogger(__name__)


def parse_listen(value: str) -> tuple[str, int]:
    """``host:port`` (``[v6addr]:port`` for IPv6) -> (host, port); ConfigurationError if not."""
    host, sep, port_text = value.strip().rpartition(':')
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ConfigurationError(f'[scheduler] metrics_listen must be host:port, got {value!r}')
    if host.startswith('[') and host.endswith(']'):
        host = host[1:-1]
    return host, int(port_text)


def worker_port(port: int, worker_index: int) -> int:
    """The port worker ``worker_index`` listens on (0 stays 0: the kernel chooses)."""
    if port == 0:
        return 0
    chosen = port + worker_index
    if chosen > 65535:
        raise ConfigurationError(f'[scheduler] metrics_listen port {port} + worker index '
                                 f'{worker_index} is above 65535')
    return chosen


class _Handler(BaseHTTPRequestHandler):
    registry: metrics.Registry = metrics.REGISTRY

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        if self.path.split('?', 1)[0] not in ('/metrics', '/'):
            self.send_error(404)
            return
        body = self.registry.render().encode('utf-8')
        self.send_response(200)
        self.send_header('Content-Type', metrics.CONTENT_TYPE)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        LOG.debug('metrics: ' + format, *args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class MetricsServer:
    """Serves ``registry`` on ``host:port`` from a daemon thread until stopped."""

    def __init__(self, host: str, port: int, registry: metrics.Registry = metrics.REGISTRY):
        handler = type('Handler', (_Handler,), {'registry': registry})
        server_class = _Server6 if ':' in host else _Server
        try:
            self._server = server_class((host, port), handler)
        except OSError as e:
            raise ConfigurationError(f'[scheduler] metrics_listen: cannot listen on '
                                     f'{host}:{port}: {e}') from e
        self.host = host
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name='metrics',
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()
        LOG.info('metrics on http://%s:%d/metrics', self.host, self.port)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()


def from_conf(listen: str | None, worker_index: int = 0) -> MetricsServer | None:
    """The worker's server for ``[scheduler] metrics_listen``; None when it is unset."""
    if not listen:
        return None
    host, port = parse_listen(listen)
    return MetricsServer(host, worker_port(port, worker_index))
