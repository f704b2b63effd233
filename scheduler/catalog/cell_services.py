"""The nova-compute services' state, read from the cell databases' ``services`` table.

What nova-scheduler itself reads before every request (``HostManager`` lists the
``nova-compute`` services of every cell and asks the servicegroup API whether
each is up), and what ``GET /os-services`` answers from the same table; read
here instead of that API when ``[cell_database]`` gives the cells' connections
(and ``[cell_database] service_states`` is left on), for the read ``[nova]
service_state_max_age`` asks for before a request. The compute API answers
with the whole table serialised as JSON, every time: Nova 34's nova-api takes
about half a millisecond per service for it (doc/performance.md).

A row becomes the record ``GET /os-services`` would show for it, by the rules
of Nova's ``ServiceController._get_service_detail`` and its database
servicegroup driver (the default): ``status`` is ``disabled`` when the row is;
``state`` is ``down`` when the service is forced down, else ``up`` when its last
heartbeat (``last_seen_up``, else ``created_at``) is within ``[DEFAULT]
service_down_time`` seconds of now, in either direction; ``updated_at`` is the
row's. So the states equal the compute API's, and the records go through the
same :class:`~scheduler.catalog.nova_api.ServicesParser` (its keys, memory and
sharing between workers). A cloud whose servicegroup driver is not the
database's (memcache) keeps heartbeats elsewhere: the rows then say the services
are down, which :class:`scheduler.catalog.nova_sync.CheckedCellServices` notices.

Only ``SELECT``, on connections made read-only (one kept per cell: a request
waits for this read), of these columns of the ``services`` table: what a
reader user needs granted is ``SELECT`` on it.
"""
from __future__ import annotations

import datetime
import functools
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.catalog.cell_db import CellDatabaseError, CellDatabaseReader
from scheduler.catalog.dbapi import Array, DirectConnection, DirectDatabase
from scheduler.catalog.hosts_file import interned
from scheduler.catalog.nova_api import (
    COMPUTE_BINARY,
    NovaApiError,
    ServiceKey,
    ServicesParser,
    ServiceState,
    ServiceStates,
)

#: Hosts named per statement of a read by host. PostgreSQL 15 read 846 of 50,000 services
#: by a sequential scan (6.6 ms of its time) where it read 500 through the unique key
#: (0.7 ms): its planner gives up the index for a long list, so a long list goes in parts.
BY_HOST_CHUNK = 250
#: Ids named per statement of a read by id: the primary key kept PostgreSQL 15 on an
#: index scan for 2,500 of 50,000 ids, where it read 846 hosts by a sequential scan;
#: 900 keeps a statement within the 999 parameters of SQLite before 3.32.
BY_ID_CHUNK = 900
#: The columns read (``binary`` and ``deleted`` select the rows; ``binary`` is
#: quoted by each dialect, a reserved word in PostgreSQL).
COLUMNS = ('host', 'disabled', 'disabled_reason', 'forced_down', 'last_seen_up',
           'created_at', 'updated_at')
_TIMESTAMPS = frozenset({'last_seen_up', 'created_at', 'updated_at'})


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


@dataclass
class _CellServices:
    """What the last read of one cell found: its services' ids and hosts in id order
    (valid while the count and the highest id stay), and the keys of that read."""

    members: tuple[int, int] = (0, 0)     # (count, highest id)
    # The ids packed, and the hosts the same string objects as the other sources' (at
    # 50,000 services, objects of their own were 5 MB of each worker).
    ids: array[int] = field(default_factory=lambda: array('q'))
    hosts: list[str] = field(default_factory=list)
    exceptions: dict[int, ServiceKey] = field(default_factory=dict)
    keys: list[ServiceKey] = field(default_factory=list)


class CellServicesReader:
    """Reads the nova-compute services of every cell, as the compute API would list
    them; what :class:`~scheduler.catalog.nova_sync.NovaSync` reads before a request
    instead of ``GET /os-services``. One read at a time (NovaSync's lock).

    A read asks each cell, in one statement, how many services it has and the
    highest id (which change when one is added or deleted) and the rows that
    are not up and enabled with no reason (disabled, forced down, a heartbeat
    outside ``service_down_time``): a few rows in a healthy cloud, against every
    row, which cost as much as the compute API's answer (75 ms at 10,000
    services); when the members changed, every row. Every other service is up
    and enabled by that very condition. A read that finds what the last one found returns
    the last read's objects, which the catalog takes without comparing them.
    """

    #: Its rows can be read a few hosts at a time (:meth:`usual_again`, :meth:`unusual_now`).
    reads_by_host = True

    def __init__(self, readers: Sequence[CellDatabaseReader], *, down_time: float,
                 clock: Callable[[], datetime.datetime] = utcnow):
        self._readers = list(readers)
        self._down_time = down_time
        self._clock = clock
        self._parser = ServicesParser()
        self._cells: dict[str, _CellServices] = {}
        self._last: tuple[ServiceStates, list[str], list[ServiceKey]] | None = None
        # The hosts :meth:`usual_again` was last given, and the ids of their rows in
        # each cell: the same hosts are read again by id.
        self._held: tuple[frozenset[str], dict[str, list[int]]] | None = None

    def read_services(self) -> tuple[ServiceStates, list[str]]:
        services, unknown, _ = self.read_service_keys()
        return services, unknown

    def read_service_keys(self) -> tuple[ServiceStates, list[str], list[ServiceKey]]:
        """Every cell's services: (state by host, hosts of no cell, the keys); NovaApiError
        when a cell cannot be read (the read failed: nothing of it is applied)."""
        now = self._clock()
        changed = False
        cells = []
        for reader in self._readers:
            cell, cell_changed = self._read(reader, now, self._cells.get(reader.label))
            changed = changed or cell_changed
            cells.append((reader.label, cell))
        if not changed and self._last is not None:
            return self._last
        self._cells = dict(cells)
        keys = [key for _, cell in cells for key in cell.keys]
        services, unknown = self._parser.parse_keys(keys)
        self._last = services, unknown, keys
        return self._last

    def states_of_keys(self, keys: Any) -> tuple[ServiceStates, list[str]]:
        return self._parser.parse_keys(keys)

    def usual_again(self, hosts: Collection[str]) -> Mapping[str, ServiceState]:
        """Of ``hosts`` (held as disabled or down), the services now up and enabled
        with no reason, and their states; NovaApiError when a cell cannot be read.

        Called before every request with the same hosts until the catalog's state
        changes, this reads their rows by host once, keeping the rows' ids, then by
        id: 846 of 50,000 services took PostgreSQL 2.0-2.9 ms a read against 3.7-5.1
        ms in four statements by host, a read made for every request of a busy
        scheduler on the database Placement's own claims wait for (doc/performance.md).
        A service deleted and created again under the same host meanwhile has a new
        id, unread here: the host keeps its old row's state until the next read of
        every row (``[cell_database] service_scan_interval``)."""
        if not hosts:
            return {}
        wanted = frozenset(hosts)
        if self._held is not None and self._held[0] == wanted:
            return self._read_ids(self._held[1])
        now = self._clock()
        states, ids = self._read_held(sorted(wanted), now)
        self._held = wanted, ids
        return states

    def unusual_now(self, hosts: Collection[str]) -> Mapping[str, ServiceState]:
        """Of ``hosts``, the services now disabled, forced down, silent or with a
        reason, and their states; NovaApiError when a cell cannot be read.

        Read by the table's unique key on host, binary and deleted (a read that costs
        the same at 100 services as at 100,000): the hosts a request is about to answer
        with, a few, never the same for long."""
        if not hosts:
            return {}
        now = self._clock()
        named = sorted(hosts)
        found = self._read_parts(lambda s: s.unusual_by_host, 'hosts', lambda _: named,
                                 BY_HOST_CHUNK, now=now)
        return self._states([row for rows in found.values() for row in rows], now)

    def _read_held(self, named: list[str], now: datetime.datetime
                   ) -> tuple[Mapping[str, ServiceState], dict[str, list[int]]]:
        """Every row of the hosts ``named``, by host: the states of those usual again,
        and the rows' ids in each cell."""
        found = self._read_parts(lambda s: s.ids_by_host, 'hosts', lambda _: named,
                                 BY_HOST_CHUNK, now=None)
        rows = (row[1:] for cell in found.values() for row in cell)
        keys = [key for key in service_keys(rows, now=now, down_time=self._down_time)
                if key[1:] == _USUAL]
        states, _ = ServicesParser().parse_keys(keys)
        return states, {label: [int(row[0]) for row in cell] for label, cell in found.items()}

    def _read_ids(self, ids: Mapping[str, list[int]]) -> Mapping[str, ServiceState]:
        """Of the rows ``ids`` (by cell), those up and enabled with no reason."""
        now = self._clock()
        found = self._read_parts(lambda s: s.usual_by_id, 'ids',
                                 lambda label: ids.get(label, []), BY_ID_CHUNK, now=now)
        return self._states([row for rows in found.values() for row in rows], now)

    def _read_parts(self, statement_of: Callable[[_Statements], str], name: str,
                    values: Callable[[str], list[Any]], size: int, *,
                    now: datetime.datetime | None) -> dict[str, list[tuple[Any, ...]]]:
        """Per cell, the rows of a statement with ``name`` bound to ``size`` of the
        cell's ``values`` at a time (a cell with none is not asked), and with the up
        window of ``now`` unless it is None; NovaApiError when a cell cannot be read.
        Each statement on its own (each row stands alone): on PostgreSQL one round
        trip, a read before every request on the database Nova writes its heartbeats to."""
        found: dict[str, list[tuple[Any, ...]]] = {}
        for reader in self._readers:
            wanted = values(reader.label)
            found[reader.label] = []
            if not wanted:
                continue
            statement = statement_of(_statements(reader.backend))
            fixed = (self._window(reader, now) if now is not None
                     else {'binary': COMPUTE_BINARY})
            # PostgreSQL: one parameter, the values as an array.
            parts = [{**fixed, name: Array(part) if reader.backend == 'postgresql' else part}
                     for part in _chunks(wanted, size)]
            try:
                found[reader.label] = reader.each_on_its_own(statement, parts)
            except CellDatabaseError as e:
                raise NovaApiError(f'cell database {reader.label}: services: {e}') from None
        return found

    def _states(self, rows: list[tuple[Any, ...]], now: datetime.datetime
                ) -> Mapping[str, ServiceState]:
        states, _ = ServicesParser().parse_keys(
            service_keys(rows, now=now, down_time=self._down_time))
        return states

    def _window(self, source: DirectConnection | DirectDatabase, now: datetime.datetime
                ) -> dict[str, Any]:
        """The parameters of a heartbeat that counts as up at ``now``, and the binary."""
        spread = datetime.timedelta(seconds=self._down_time)
        return {'low': source.timestamp(now - spread),
                'high': source.timestamp(now + spread), 'binary': COMPUTE_BINARY}

    def service_hosts(self, *, read: bool = False) -> set[str] | None:
        """Every cell's nova-compute service hosts at the last read of every row; None
        before one, unless ``read``: then, with no such read held, the hosts read now,
        alone (a worker that takes its reads from the service's reader holds none, and
        keeps nothing of this one); NovaApiError when a cell cannot be read."""
        if self._cells:
            return {host for cell in self._cells.values() for host in cell.hosts}
        if not read:
            return None
        found: set[str] = set()
        for reader in self._readers:
            try:
                with reader.connect() as connection:
                    found.update(interned(row[0]) for row in connection.rows(
                        _statements(connection.backend).hosts, {'binary': COMPUTE_BINARY}))
            except CellDatabaseError as e:
                raise NovaApiError(f'cell database {reader.label}: services: {e}') from None
        return found

    def _read(self, reader: CellDatabaseReader, now: datetime.datetime,
              last: _CellServices | None) -> tuple[_CellServices, bool]:
        """This cell's services now, and whether their keys differ from ``last``'s."""
        try:
            with reader.connect() as connection:
                statements = _statements(connection.backend)
                full = last is None
                if last is not None:
                    # One round trip: the members, and the unusual rows.
                    members, rows = _members_and_unusual(
                        connection.backend, connection.rows(statements.members_and_unusual,
                                                            self._window(connection, now)))
                    full = members != last.members
                if full:
                    rows = connection.rows(statements.every_row, {'binary': COMPUTE_BINARY})
                    members = (len(rows), max((row[0] for row in rows), default=0))
        except CellDatabaseError as e:
            raise NovaApiError(f'cell database {reader.label}: services: {e}') from None
        row_keys = service_keys((row[1:] for row in rows), now=now, down_time=self._down_time)
        if full:
            cell = _CellServices(members, array('q', (row[0] for row in rows)),
                                 [interned(row[1]) for row in rows])
        else:
            assert last is not None
            cell = _CellServices(members, last.ids, last.hosts)
        cell.exceptions = {row[0]: key for row, key in zip(rows, row_keys, strict=True)
                           if key[1:] != _USUAL}
        if last is not None and not full and cell.exceptions == last.exceptions:
            cell.keys = last.keys
            return cell, False
        exceptions = cell.exceptions
        cell.keys = [exceptions.get(ident) or (host, *_USUAL)
                     for ident, host in zip(cell.ids, cell.hosts, strict=True)]
        return cell, last is None or cell.keys != last.keys


def _members_and_unusual(backend: str, found: list[tuple[Any, ...]]
                         ) -> tuple[tuple[int, int], list[tuple[Any, ...]]]:
    """The (count, highest id) and the unusual rows (id first, in id order) of what
    ``members_and_unusual`` found: on PostgreSQL one row, the unusual rows a JSON array
    (NULL when none is; timestamps as ISO text, which :func:`service_keys` reads as it
    reads SQLite's), elsewhere the unusual rows joined to the members (a row of NULLs
    when none is)."""
    if backend == 'postgresql':
        [(count, highest, unusual)] = found
        rows = [tuple(row) for row in unusual or ()]
    else:
        count, highest = found[0][0], found[0][1]
        rows = [row[2:] for row in found if row[2] is not None]
    return (int(count or 0), int(highest or 0)), rows


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


#: The key of an up, enabled service with no reason, but for its host.
_USUAL: ServiceKey = ('enabled', 'up', None, False, None)


@dataclass(frozen=True)
class _Statements:
    """The reads of one backend, ``:binary`` the compute services' (Nova's models: a
    boolean is PostgreSQL's boolean, MySQL's and SQLite's 0 or 1, which ``IS TRUE``
    reads alike; ``binary`` is a reserved word, quoted as each quotes a name)."""

    hosts: str
    every_row: str
    members_and_unusual: str
    #: By host, the unusual rows; every row with its id. By id, the usual rows.
    unusual_by_host: str
    ids_by_host: str
    usual_by_id: str


@functools.cache
def _statements(backend: str) -> _Statements:
    """:class:`_Statements` for ``backend``, written once."""
    binary = '`binary`' if backend == 'mysql' else '"binary"'
    columns = ', '.join(f's.{c}' for c in COLUMNS)
    live = f's.deleted = 0 AND s.{binary} = :binary'
    heartbeat = 'COALESCE(s.last_seen_up, s.created_at)'
    # Exactly the rows whose key is not "up, enabled, no reason, not forced", a
    # heartbeat within [low, high] being up; never NULL, so that NOT is its complement.
    unusual = (f'(s.disabled IS TRUE OR s.forced_down IS TRUE '
               f'OR s.disabled_reason IS NOT NULL OR {heartbeat} IS NULL '
               f'OR {heartbeat} < :low OR {heartbeat} > :high)')
    # PostgreSQL: the hosts as one array parameter (expanding a list into 250
    # parameters, then quoting each, took most of a read's CPU in the service).
    named = 's.host = ANY(:hosts)' if backend == 'postgresql' else 's.host IN :hosts'
    by_id = 's.id = ANY(:ids)' if backend == 'postgresql' else 's.id IN :ids'
    if backend == 'postgresql':
        # One pass over the table, the unusual rows as one JSON array, where the join
        # below makes two: 17.4 against 23.1 ms at 50,000 services with their heartbeats
        # running (PostgreSQL 15; an array a column took 28.5, the condition tested once
        # a column), and the join took 95-300 ms of bench.view's bloated table.
        # Timestamps as text with all six digits of their microseconds (JSON's own
        # drops trailing zeros, which Python 3.10's fromisoformat refuses).
        as_json = ', '.join(f"to_char(s.{c}, 'YYYY-MM-DD\"T\"HH24:MI:SS.US')"
                            if c in _TIMESTAMPS else f's.{c}' for c in COLUMNS)
        members_and_unusual = (
            f'SELECT COUNT(*), MAX(s.id), json_agg(json_build_array(s.id, {as_json}) '
            f'ORDER BY s.id) FILTER (WHERE {unusual}) FROM services s WHERE {live}')
    else:
        members_and_unusual = (
            f'SELECT counted.n, counted.m, s.id, {columns} FROM '
            f'(SELECT COUNT(*) AS n, MAX(s.id) AS m FROM services s WHERE {live}) counted '
            f'LEFT OUTER JOIN services s ON {live} AND {unusual} ORDER BY s.id')
    return _Statements(
        hosts=f'SELECT s.host FROM services s WHERE {live}',
        every_row=f'SELECT s.id, {columns} FROM services s WHERE {live} ORDER BY s.id',
        members_and_unusual=members_and_unusual,
        unusual_by_host=f'SELECT {columns} FROM services s WHERE {live} AND {named} AND {unusual}',
        ids_by_host=f'SELECT s.id, {columns} FROM services s WHERE {live} AND {named}',
        usual_by_id=(f'SELECT {columns} FROM services s WHERE {live} AND {by_id} '
                     f'AND NOT {unusual}'))
