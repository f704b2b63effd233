"""A tiny stand-in for Placement that serves one canned allocation-candidates answer.

For the memory benchmark only: a real Placement cannot be seeded with 50,000
providers within the benchmark's time (about 4 requests per provider), and
what is measured there is the service's memory, not Placement. It answers
``GET /`` like Placement 16 (max_version 1.39), every ``GET
/allocation_candidates`` with the same body, accepts every claim (``PUT
/allocations/{consumer}`` -> 204, counted) and answers the few reads a claim
or a name lookup may make with empty results.
"""
from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

_VERSIONS = json.dumps({'versions': [{
    'id': 'v1.0', 'max_version': '1.39', 'min_version': '1.0', 'status': 'CURRENT',
    'links': [{'rel': 'self', 'href': ''}]}]}).encode()
_ALLOCATIONS = re.compile(r'^/allocations/[0-9a-fA-F-]{36}$')


class StubPlacement:
    """Serves on 127.0.0.1 (a free port) from a daemon thread until :meth:`stop`."""

    def __init__(self, candidates_body: bytes):
        self.body = candidates_body
        # Like Placement, ``limit=N`` answers the first N candidates and the
        # summaries of their providers' trees.
        self._parsed = json.loads(candidates_body)
        self._limited: dict[int, bytes] = {}
        self.claims = 0
        self.candidate_requests = 0
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'

            def _send(self, status: int, body: bytes = b'') -> None:
                self.send_response(status)
                if body:
                    self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(body)))
                self.send_header('OpenStack-API-Version', 'placement 1.36')
                self.end_headers()
                if body:
                    self.wfile.write(body)

            def _drain(self) -> None:
                length = int(self.headers.get('Content-Length') or 0)
                if length:
                    self.rfile.read(length)

            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                path = self.path.split('?', 1)[0]
                if path in ('/', ''):
                    self._send(200, _VERSIONS)
                elif path == '/allocation_candidates':
                    with stub._lock:
                        stub.candidate_requests += 1
                    query = parse_qs(self.path.partition('?')[2])
                    limit = int(query['limit'][0]) if 'limit' in query else None
                    self._send(200, stub.answer(limit))
                elif _ALLOCATIONS.match(path):
                    self._send(200, b'{"allocations": {}}')
                elif path == '/resource_providers':
                    self._send(200, b'{"resource_providers": []}')
                else:
                    self._send(404, b'{"errors": [{"status": 404, "detail": "stub"}]}')

            def do_PUT(self) -> None:  # noqa: N802
                self._drain()
                if _ALLOCATIONS.match(self.path):
                    with stub._lock:
                        stub.claims += 1
                    self._send(204)
                else:
                    self._send(404, b'{"errors": [{"status": 404, "detail": "stub"}]}')

            def do_DELETE(self) -> None:  # noqa: N802
                self._send(204 if _ALLOCATIONS.match(self.path) else 404)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        self._server = Server(('127.0.0.1', 0), Handler)
        self.url = f'http://127.0.0.1:{self._server.server_address[1]}'
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name='stub-placement', daemon=True)

    def answer(self, limit: int | None) -> bytes:
        requests = self._parsed['allocation_requests']
        if limit is None or limit >= len(requests):
            return self.body
        with self._lock:
            if limit not in self._limited:
                kept = requests[:limit]
                summaries = self._parsed['provider_summaries']
                roots = {summaries[rp]['root_provider_uuid']
                         for r in kept for rp in r['allocations']}
                self._limited[limit] = json.dumps({
                    'allocation_requests': kept,
                    'provider_summaries': {rp: s for rp, s in summaries.items()
                                           if s['root_provider_uuid'] in roots}}).encode()
            return self._limited[limit]

    def start(self) -> StubPlacement:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
