"""The RPC server: oslo.messaging's, with each call served inside the claims journal,
and the request's large objects freed by the call's own thread once its reply is out.

A request's journal records say "nobody has answered for these claims": they
must stay while the call is served and go as its reply is handed to the
transport. They are dropped just *before* the reply is handed over, not after:
a worker killed between the two then leaves claims behind (what happened
without a journal), whereas dropping after would have the next worker give
back the claims of an answered request, whose instance nova-compute is already
building on them.

oslo.messaging's server dispatches a call and sends its reply in one method
(``_process_incoming``, run by one executor thread per message): the journal's
request is entered around it, and the message's ``reply`` ends the request first.
Around both, :func:`scheduler.memory.release.after_reply`: what the manager handed
over to be freed after the reply is freed when that method returns.

The server's listener waits longer after each message than oslo.messaging's own
(:func:`wait_longer_after_messages`).
"""
from __future__ import annotations

import functools
import logging
from typing import Any

import oslo_messaging as messaging
from oslo_messaging.rpc import server as rpc_server

from scheduler.journal.log import JournalError
from scheduler.journal.requests import Request, RequestJournal
from scheduler.memory.release import after_reply

LOG = logging.getLogger(__name__)

#: Seconds oslo.messaging's AMQP listener blocks for the next message right after
#: one came, before the wait doubles (up to its 5 s). Its own floor, 1 ms
#: (``amqpdriver.ACK_REQUEUE_EVERY_SECONDS_MIN``), is there so that the
#: acknowledgements other threads queue for the listener (a notification
#: listener's) go out promptly. An RPC server acknowledges each message as it
#: arrives and queues none, and a message ends the wait whatever its length: so the
#: floor only decides how often an idle listener wakes, through kombu's whole retry
#: wrapper each time. At 4 calls a second per worker those wakes were 9% of a
#: worker's profile samples at 50,000 nested providers, and 2.5-2.9 ms of CPU a call
#: in bench/rpc_listener.py (doc/performance.md, *The RPC listener's wakes*).
LISTENER_WAIT_AFTER_MESSAGE = 0.25


class SchedulerRPCServer(rpc_server.RPCServer):
    def __init__(self, transport: Any, target: Any, dispatcher: Any, executor: Any = None, *,
                 journal: RequestJournal | None):
        super().__init__(transport, target, dispatcher, executor)
        self._journal = journal

    def _process_incoming(self, incoming: Any) -> None:
        with after_reply():
            if self._journal is None:
                super()._process_incoming(incoming)
                return
            with self._journal.serving() as request:
                super()._process_incoming([_EndsBeforeReply(incoming[0], request)])


class _EndsBeforeReply:
    """An incoming message whose reply ends the journal's request first."""

    def __init__(self, message: Any, request: Request):
        self._message, self._request = message, request

    def reply(self, *args: Any, **kwargs: Any) -> Any:
        if self._request.consumers and not self._request.ended:
            # The one moment a kill leaves claims nobody gives back (see above):
            # what an operator, or the chaos drill, can match a caller's timeout to.
            LOG.debug('replying: the claims of %s are the caller\'s from now on',
                      ', '.join(self._request.consumers))
        try:
            self._request.end()
        except JournalError as e:
            # The records stay: the caller must not be answered for claims a later
            # worker would give back. It times out instead.
            LOG.error('not replying: %s; the claims of this request are given back when a '
                      'worker next reads the journal', e)
            raise
        return self._message.reply(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._message, name)


def get_rpc_server(transport: messaging.Transport, target: messaging.Target,
                   endpoints: list[Any], *, serializer: Any, access_policy: Any,
                   journal: RequestJournal | None) -> Any:
    """oslo.messaging's threading RPC server, as :class:`SchedulerRPCServer`; with
    ``journal``, one that serves each call inside it."""
    wait_longer_after_messages()
    return messaging.get_rpc_server(
        transport, target, endpoints, executor='threading', serializer=serializer,
        access_policy=access_policy,
        server_cls=functools.partial(SchedulerRPCServer, journal=journal))


def wait_longer_after_messages() -> None:
    """Raise the AMQP listeners' first wait after a message to
    :data:`LISTENER_WAIT_AFTER_MESSAGE`. The setting is the process's: a service
    worker's one listener is this server's (it sends notifications, and listens to
    none). Nothing when oslo.messaging no longer has it (tests/unit/test_rpc_server.py
    fails first)."""
    from oslo_messaging._drivers import amqpdriver

    floor = getattr(amqpdriver, 'ACK_REQUEUE_EVERY_SECONDS_MIN', None)
    if isinstance(floor, (int, float)) and floor < LISTENER_WAIT_AFTER_MESSAGE:
        amqpdriver.ACK_REQUEUE_EVERY_SECONDS_MIN = LISTENER_WAIT_AFTER_MESSAGE
