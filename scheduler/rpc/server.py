"""The RPC server: oslo.messaging's, with each call served inside the claims journal.

A request's journal records must stay until its reply has been handed to the
transport, and be dropped right after: oslo.messaging's server dispatches a call
and sends its reply in one method (``_process_incoming``, run by one executor
thread per message), so the journal's request is entered around exactly that.
"""
from __future__ import annotations

import functools
from typing import Any

import oslo_messaging as messaging
from oslo_messaging.rpc import server as rpc_server

from scheduler.journal.requests import RequestJournal


class JournaledRPCServer(rpc_server.RPCServer):
    def __init__(self, transport: Any, target: Any, dispatcher: Any, executor: Any = None, *,
                 journal: RequestJournal):
        super().__init__(transport, target, dispatcher, executor)
        self._journal = journal

    def _process_incoming(self, incoming: Any) -> None:
        with self._journal.serving():
            super()._process_incoming(incoming)


def get_rpc_server(transport: messaging.Transport, target: messaging.Target,
                   endpoints: list[Any], *, serializer: Any, access_policy: Any,
                   journal: RequestJournal | None) -> Any:
    """oslo.messaging's threading RPC server; with ``journal``, one that serves each
    call inside it."""
    extra = {}
    if journal is not None:
        extra['server_cls'] = functools.partial(JournaledRPCServer, journal=journal)
    return messaging.get_rpc_server(transport, target, endpoints, executor='threading',
                                    serializer=serializer, access_policy=access_policy,
                                    **extra)
