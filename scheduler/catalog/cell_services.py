"""The nova-compute services' state, read from the cell databases' ``services`` table.

What nova-scheduler itself reads before every request (``HostManager`` lists the
``nova-compute`` services of every cell and asks the servicegroup API whether
each is up), and what ``GET /os-services`` answers from the same table; read
here instead of that API when ``[cell_database]`` gives the cells' connections
and ``[cell_database] service_states`` is on, for the read ``[nova]
service_state_max_age`` asks for before a request. The compute API answers
with the whole table serialised as JSON, every time: at 50,000 services the
scheduler's decoding alone was 70 ms of CPU per read, and nova-api's own work
more (doc/performance.md).

A row becomes the record ``GET /os-services`` would show for it, by the rules
of Nova's ``ServiceController._get_service_detail`` and its database
servicegroup driver (the default): ``status`` is ``disabled`` when the row is;
``state`` is ``down`` when the service is forced down, else ``up`` when its last
heartbeat (``last_seen_up``, else ``created_at``) is within ``[DEFAULT]
service_down_time`` seconds of now, in either direction; ``updated_at`` is the
row's. So the states equal the compute API's, and the records go through the
same :class:`~scheduler.catalog.nova_api.ServicesParser` (its keys, memory and
sharing between workers). A cloud whose servicegroup driver is not the
database's (memcache) keeps heartbeats elsewhere: turn ``service_states`` off.

Only ``SELECT``, on connections made read-only, of these columns of the
``services`` table: what a reader user needs granted is ``SELECT`` on it.
"""
from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from scheduler.catalog.cell_db import CellDatabaseError, CellDatabaseReader
from scheduler.catalog.nova_api import (
    COMPUTE_BINARY,
    NovaApiError,
    ServiceKey,
    ServicesParser,
    ServiceState,
)
from scheduler.catalog.readonly_db import sqlalchemy_module
from scheduler.conf.cell_database import GROUP

#: The only statement sent (besides the read-only session setup); ``binary`` is
#: quoted by the dialect (a reserved word in PostgreSQL).
COLUMNS = ('host', 'disabled', 'disabled_reason', 'forced_down', 'last_seen_up',
           'created_at', 'updated_at')


def utcnow() -> datetime.datetime:
    """Now, as Nova's ``timeutils.utcnow()``: naive UTC (the table's timestamps)."""
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def _naive(moment: Any) -> datetime.datetime | None:
    if isinstance(moment, str):     # SQLite's drivers give text (Nova's is_up takes it too)
        try:
            moment = datetime.datetime.fromisoformat(moment)
        except ValueError:
            return None
    if not isinstance(moment, datetime.datetime):
        return None
    return (moment.astimezone(datetime.timezone.utc).replace(tzinfo=None)
            if moment.tzinfo is not None else moment)


def _timestamp(moment: datetime.datetime | None) -> str | None:
    # As nova-api serialises a datetime.
    return None if moment is None else moment.strftime('%Y-%m-%dT%H:%M:%S.%f')


def service_keys(rows: Iterable[Sequence[Any]], *, now: datetime.datetime,
                 down_time: float) -> list[ServiceKey]:
    """Rows of :data:`COLUMNS` -> the keys of the records ``GET /os-services`` shows
    for them (pure: ``now`` naive UTC, ``down_time`` Nova's ``service_down_time``)."""
    keys: list[ServiceKey] = []
    for host, disabled, reason, forced_down, last_seen_up, created_at, updated_at in rows:
        forced = bool(forced_down)
        up = False
        if not forced:
            heartbeat = _naive(last_seen_up) or _naive(created_at)
            up = (heartbeat is not None
                  and abs((now - heartbeat).total_seconds()) <= down_time)
        keys.append((host, 'disabled' if disabled else 'enabled', 'up' if up else 'down',
                     reason, forced, None if up else _timestamp(_naive(updated_at))))
    return keys


class CellServicesReader:
    """Reads the nova-compute services of every cell, as the compute API would list
    them; what :class:`~scheduler.catalog.nova_sync.NovaSync` reads before a request
    instead of ``GET /os-services``. One read at a time (NovaSync's lock)."""

    def __init__(self, readers: Sequence[CellDatabaseReader], *, down_time: float,
                 clock: Callable[[], datetime.datetime] = utcnow):
        self._readers = list(readers)
        self._down_time = down_time
        self._clock = clock
        self._parser = ServicesParser()

    def read_services(self) -> tuple[dict[str, ServiceState], list[str]]:
        services, unknown, _ = self.read_service_keys()
        return services, unknown

    def read_service_keys(self) -> tuple[dict[str, ServiceState], list[str], list[ServiceKey]]:
        """Every cell's services: (state by host, hosts of no cell, the keys); NovaApiError
        when a cell cannot be read (the read failed: nothing of it is applied)."""
        rows: list[Sequence[Any]] = []
        for reader in self._readers:
            rows.extend(self._rows(reader))
        keys = service_keys(rows, now=self._clock(), down_time=self._down_time)
        services, unknown = self._parser.parse_keys(keys)
        return services, unknown, keys

    def states_of_keys(self, keys: Any) -> tuple[dict[str, ServiceState], list[str]]:
        return self._parser.parse_keys(keys)

    @staticmethod
    def _rows(reader: CellDatabaseReader) -> list[Sequence[Any]]:
        sqlalchemy = sqlalchemy_module(f'[{GROUP}] connections')
        table = sqlalchemy.table('services', *(sqlalchemy.column(c) for c in
                                               (*COLUMNS, 'id', 'binary', 'deleted')))
        # In the order the compute API lists them: the workers sharing reads
        # compare the keys of one read with the last's.
        statement = (sqlalchemy.select(*(table.c[c] for c in COLUMNS))
                     .where(table.c.deleted == 0, table.c.binary == COMPUTE_BINARY)
                     .order_by(table.c.id))
        try:
            with reader.connect() as connection:
                return [tuple(row) for row in connection.execute(statement)]
        except CellDatabaseError as e:
            raise NovaApiError(f'cell database {reader.label}: services: {e}') from None
