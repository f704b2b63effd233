"""What an RPC server process spends per call on oslo.messaging, with its AMQP
listener's first wait after a message as oslo.messaging sets it and as the
service sets it (scheduler/rpc/server.py, ``LISTENER_WAIT_AFTER_MESSAGE``).

``python -m bench.rpc_listener [--rate R] [--seconds S] [--url URL]``: for each
setting, a fresh server process (``executor='threading'``, the service's) with
one endpoint that answers a call with a reply the size of a ``select_destinations``
reply, called ``R`` times a second for ``S`` seconds by one client with an
argument the size of a ``select_destinations`` call (the sizes of Nova 34's
messages in ``../shared/reference/wire``). The server's CPU (user + system,
from ``/proc/<pid>/stat``) over the calls, per call. A worker of the service at
50,000 nested providers serves about 4 calls a second (doc/performance.md).

Needs RabbitMQ (``--url``, default 127.0.0.1:5672 guest/guest).
"""
from __future__ import annotations

import argparse
import functools
import multiprocessing
import sys
import time
from typing import Any

from bench.cpu import process_seconds
from bench.report import Row, render

DEFAULT_URL = 'rabbit://guest:guest@127.0.0.1:5672/'
#: Bytes of a select_destinations call and of its reply (one instance, two
#: alternates) as Nova 34 sends them.
CALL_BYTES = 17_000
REPLY_BYTES = 14_000
TOPIC = 'bench-rpc-listener'


class _Endpoint:
    def answer(self, ctxt: Any, argument: str) -> str:
        return 'r' * REPLY_BYTES


def _serve(ours: bool, url: str, ready: Any) -> None:
    import oslo_messaging as messaging

    from scheduler.rpc import server

    transport = messaging.get_rpc_transport(_conf(), url=url)
    target = messaging.Target(topic=TOPIC, server='bench')
    if ours:
        rpc = server.get_rpc_server(transport, target, [_Endpoint()], serializer=None,
                                    access_policy=None, journal=None)
    else:
        rpc = messaging.get_rpc_server(transport, target, [_Endpoint()])
    rpc.start()
    ready.set()
    while True:
        time.sleep(60)


@functools.cache
def _conf() -> Any:
    """oslo.config's global options, parsed once (oslo.messaging registers its
    tracing options there)."""
    from oslo_config import cfg

    cfg.CONF([], project='bench-rpc-listener')
    return cfg.CONF


def measure(ours: bool, *, rate: float, seconds: float, url: str) -> float:
    """The server's CPU milliseconds per call."""
    import oslo_messaging as messaging

    context = multiprocessing.get_context('fork')
    ready = context.Event()
    process = context.Process(target=_serve, args=(ours, url, ready), daemon=True)
    process.start()
    try:
        if not ready.wait(60):
            raise RuntimeError('the RPC server did not start')
        client = messaging.get_rpc_client(messaging.get_rpc_transport(_conf(), url=url),
                                          messaging.Target(topic=TOPIC, server='bench'))
        argument = 'a' * CALL_BYTES
        for _ in range(5):      # the connections, queues and threads, before the clock
            client.call({}, 'answer', argument=argument)
        time.sleep(6)           # the listener's wait back at its longest
        calls = int(rate * seconds)
        cpu_before, started = process_seconds(process.pid), time.monotonic()
        for i in range(calls):
            client.call({}, 'answer', argument=argument)
            time.sleep(max(0.0, started + (i + 1) / rate - time.monotonic()))
        return 1000 * (process_seconds(process.pid) - cpu_before) / calls
    finally:
        process.terminate()
        process.join(10)


def run(rate: float = 4.0, seconds: float = 20.0, url: str = DEFAULT_URL) -> list[Row]:
    theirs = measure(False, rate=rate, seconds=seconds, url=url)
    ours = measure(True, rate=rate, seconds=seconds, url=url)
    note = f'server CPU per call, {rate:g} calls/s for {seconds:g} s'
    return [Row("RPC server: oslo.messaging's first wait after a message (1 ms)", None,
                theirs, note=note),
            Row('RPC server: the service\'s (LISTENER_WAIT_AFTER_MESSAGE)', None, ours,
                note=note)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser('python -m bench.rpc_listener', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--rate', type=float, default=4.0)
    parser.add_argument('--seconds', type=float, default=20.0)
    parser.add_argument('--url', default=DEFAULT_URL)
    args = parser.parse_args(argv)
    print(render(run(args.rate, args.seconds, args.url)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
