"""Nova compute API JSON -> HostCatalog records (pure: no I/O, no clock).

Three documents make one :class:`NovaSnapshot`:

* ``GET /os-aggregates``: aggregates with uuid (2.41+), hosts and metadata;
* ``GET /os-services?binary=nova-compute``: per service host, Nova's own
  up/down verdict (``state``), ``status`` enabled/disabled, ``disabled_reason``,
  ``forced_down`` (2.11+) and ``updated_at`` (the last heartbeat, kept for a
  service that is down);
* ``GET /os-hypervisors/detail`` (paged with limit/marker): per compute node
  its uuid (2.53+: the compute node uuid, which is its root provider's uuid in
  Placement), ``hypervisor_hostname`` (the nodename), the service host,
  ``host_ip``, ``hypervisor_type``/``hypervisor_version`` and ``cpu_info``
  (an object since 2.28, gone in 2.88 — hence microversion 2.87).

Parsing is strict: a document that is not what the API reference describes
raises :class:`NovaApiError` naming the entry, and the caller keeps its last
good snapshot rather than applying a partial one.
"""
from __future__ import annotations

import datetime
import json
import uuid as uuidlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from scheduler.catalog.hosts_file import interned
from scheduler.exceptions import SchedulerError
from scheduler.objects.spec import Aggregate

COMPUTE_BINARY = 'nova-compute'
#: Stands in for the heartbeat of a service Nova reports down that never sent one.
NEVER = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


class NovaApiError(SchedulerError):
    """The compute API could not be read, or answered something we cannot use."""

    def __init__(self, message: str, *, status_code: int | None = None):
        super().__init__(message)
        #: The HTTP status of an answer that was not 200; None for other failures.
        self.status_code = status_code


@dataclass(frozen=True, slots=True)
class ServiceState:
    """One nova-compute service as the compute API reported it."""

    host: str
    up: bool
    disabled: bool = False
    disabled_reason: str | None = None
    forced_down: bool = False
    #: The last heartbeat of a service Nova reports down; None when up (see
    #: :class:`ServicesParser`).
    updated_at: datetime.datetime | None = None

    @property
    def last_seen_up(self) -> datetime.datetime | None:
        """The HostRecord value that makes ComputeFilter repeat Nova's verdict.

        Up: None ("no heartbeat data"), so the verdict is not re-aged by our
        clock between two syncs (with the default 60 s interval and 60 s
        service_down_time, re-aging the heartbeat would mark live hosts down).
        Down: the last heartbeat (or :data:`NEVER`), which ComputeFilter finds
        older than service_down_time.
        """
        if self.up:
            return None
        return self.updated_at or NEVER


class ServiceStates(Mapping[str, ServiceState]):
    """The compute services' states by host, as one read found them (read-only).

    In a healthy cloud nearly every service is up and enabled with no reason, and
    such a service's :class:`ServiceState` says nothing its host does not: those
    are held as their hosts alone (:attr:`usual`), and a state is made for one when
    asked for; the others as states (:attr:`other`). A state per host and a dict of
    them were about 6 MB of every worker at 50,000 computes, and each request reads
    only a few of them.
    """

    __slots__ = ('usual', 'other')

    def __init__(self, usual: AbstractSet[str] = frozenset(),
                 other: Mapping[str, ServiceState] | None = None):
        #: The hosts of the services up and enabled with no reason, not forced down.
        self.usual = usual
        #: Every other service's state, by host (none of its hosts is in ``usual``).
        self.other: Mapping[str, ServiceState] = other if other is not None else {}

    @classmethod
    def of(cls, states: Mapping[str, ServiceState]) -> ServiceStates:
        """``states`` as a :class:`ServiceStates` (itself when it is one)."""
        if isinstance(states, ServiceStates):
            return states
        usual = {host for host, state in states.items() if _usual_state(state)}
        return cls(usual, {host: state for host, state in states.items()
                           if host not in usual})

    def updated(self, states: Mapping[str, ServiceState]) -> ServiceStates:
        """These states with ``states`` in place of theirs for the same hosts."""
        usual, other = set(self.usual), dict(self.other)
        for host, state in states.items():
            if _usual_state(state):
                usual.add(host)
                other.pop(host, None)
            else:
                usual.discard(host)
                other[host] = state
        return ServiceStates(usual, other)

    def __getitem__(self, host: str) -> ServiceState:
        state = self.other.get(host)
        if state is not None:
            return state
        if host in self.usual:
            return ServiceState(host, True)
        raise KeyError(host)

    def get(self, host: str, default: Any = None) -> Any:
        state = self.other.get(host)
        if state is not None:
            return state
        return ServiceState(host, True) if host in self.usual else default

    def __contains__(self, host: object) -> bool:
        return host in self.other or host in self.usual

    def __iter__(self) -> Iterator[str]:
        yield from self.usual
        yield from self.other

    def __len__(self) -> int:
        return len(self.usual) + len(self.other)

    def __repr__(self) -> str:
        return f'ServiceStates({len(self.usual)} up and enabled, other={dict(self.other)!r})'


@dataclass(frozen=True)
class HypervisorInfo:
    """One compute node as GET /os-hypervisors/detail reported it."""

    provider_uuid: str
    nodename: str
    service_host: str
    host_ip: str | None = None
    hypervisor_type: str | None = None
    hypervisor_version: int | None = None
    cpu_info: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NovaSnapshot:
    """Everything one sync read; applied to the catalog as a whole."""

    aggregates: tuple[Aggregate, ...] = ()
    services: Mapping[str, ServiceState] = field(default_factory=ServiceStates)  # by host
    hypervisors: tuple[HypervisorInfo, ...] = ()
    #: Services Nova could not describe (down cells answer status UNKNOWN).
    unknown_services: tuple[str, ...] = ()


# ---------------------------------------------------------------- aggregates


def parse_aggregates(body: Any) -> list[Aggregate]:
    """``GET /os-aggregates`` -> aggregates (metadata values as strings, like Nova's)."""
    items = _list_in(body, 'aggregates')
    result = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        where = f'aggregates[{i}]'
        _require_mapping(item, where)
        agg_uuid = _uuid(item.get('uuid'), f'{where}.uuid')
        if agg_uuid in seen:
            raise NovaApiError(f'{where}: duplicate aggregate uuid {agg_uuid}')
        seen.add(agg_uuid)
        agg_id = item.get('id')
        if isinstance(agg_id, bool) or not isinstance(agg_id, int):
            raise NovaApiError(f'{where}.id: expected an integer, got {agg_id!r}')
        name = _string(item.get('name'), f'{where}.name')
        metadata = _string_map(item.get('metadata'), f'{where}.metadata')
        zone = item.get('availability_zone')
        # Nova keeps the zone in the metadata and echoes it at the top level.
        if isinstance(zone, str) and zone and 'availability_zone' not in metadata:
            metadata['availability_zone'] = zone
        hosts = item.get('hosts') or []
        if not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts):
            raise NovaApiError(f'{where}.hosts: expected a list of host names, got {hosts!r}')
        # The hosts' names as the catalog's other sources hold them: an availability zone
        # names every host, and its names decoded anew at every sync were a worker's own
        # copy of 50,000 strings, two while an older snapshot is still referenced.
        result.append(Aggregate(id=agg_id, uuid=agg_uuid, name=name,
                                hosts=list(dict.fromkeys(map(interned, hosts))),
                                metadata=metadata))
    return result


# ------------------------------------------------------------------ services


def parse_services(body: Any) -> tuple[ServiceStates, list[str]]:
    """``GET /os-services`` -> (nova-compute services by host, hosts Nova could not describe).

    Other binaries are ignored (the query asks for nova-compute only, but a
    filter the API ignored must not turn a conductor into a compute host).
    """
    return ServicesParser().parse(body)


#: The fields of a ``GET /os-services`` record a :class:`ServicesParser` reads, in
#: the order of its keys.
SERVICE_FIELDS = ('host', 'status', 'state', 'disabled_reason', 'forced_down', 'updated_at')
#: One record's key: those fields as the API gave them, ``updated_at`` None when up.
ServiceKey = tuple[Any, ...]


class ServicesParser:
    """:func:`parse_services` for a caller that reads the same services again and
    again (before every request, by default).

    Each nova-compute record becomes a key, its fields as the API gave them
    (:data:`SERVICE_FIELDS`), and a key seen at the last read is not validated and
    parsed again (an up, enabled service's gives its host to the read's
    :class:`ServiceStates`, another's the same :class:`ServiceState` object as
    then): parsing every record again cost several times the JSON decoding
    (335 against 71 ms of CPU for 50,000 services; 99 ms remembering the last
    read, with 2% of them sending a heartbeat in between: ``python -m
    bench.services_parse``). An up service's key and state
    leave its heartbeat out (``updated_at`` None): Nova's verdict "up" is what
    decides (:attr:`ServiceState.last_seen_up`), and with it a read changes only
    when some service's state does, not every time a service reports in.

    A read's keys, in the API's order (:meth:`parse_with_keys`), are what
    workers sharing a read compare and hand each other (:meth:`parse_keys` takes
    them back). Two threads may parse at once: the memory is a shortcut, and
    any last read's is right.
    """

    def __init__(self) -> None:
        # The last read's states, and by key those of services other than up and
        # enabled. A worker holds no key of a read beyond the read: an up, enabled
        # service's key says nothing its host in the last read does not, and 50,000
        # keys and an index of them were 8 MB of every worker.
        self._last_result = ServiceStates()
        self._last: dict[ServiceKey, ServiceState] = {}
        # For :meth:`parse_raw_with_keys`: the last read's records as the API wrote
        # them and their keys (None: not a nova-compute record), and the last
        # read's keys and result.
        self._raw: tuple[list[bytes], list[Any]] = ([], [])
        self._last_read: tuple[list[ServiceKey] | None,
                               tuple[ServiceStates, list[str]]] = (None, (ServiceStates(), []))

    def parse(self, body: Any) -> tuple[ServiceStates, list[str]]:
        services, unknown, _ = self.parse_with_keys(body)
        return services, unknown

    def parse_raw_with_keys(self, raw: bytes
                            ) -> tuple[ServiceStates, list[str], list[ServiceKey]]:
        """:meth:`parse_with_keys` of the answer's bytes, without decoding the
        records the last read held byte for byte.

        Decoding the whole answer cost more than what the parser remembers saves
        (117 against 187 ms of CPU for 50,000 services, most of whose records are
        as they were: ``python -m bench.services_parse``). The list is split where
        one record ends and the next begins, and a piece unlike the last read's in
        its place (anywhere in it, when services came or went) is decoded alone,
        wrapped in its braces; a piece that is not an object by itself (the split
        fell inside a string, or a record holds a list of objects) or an envelope
        other than ``{"services": [...]}`` decodes the whole answer instead. Every
        piece being an object by itself, the answer is exactly the list of those
        objects, so the result is the whole decoding's. A read whose keys are the
        last read's (every heartbeat of an up service, and nothing else, moved)
        gives the last read's result: the caller must not change it.
        """
        pieces = _record_pieces(raw)
        if pieces is None:
            return self._parse_decoded(raw)
        last_pieces, last_found = self._raw
        # The API lists the services in the same order each time: a record is
        # mostly where it was, and comparing bytes costs less than hashing them.
        found = [key if piece == was else _UNSEEN
                 for piece, was, key in zip(pieces, last_pieces, last_found, strict=False)]
        found.extend(_UNSEEN for _ in range(len(pieces) - len(found)))
        unseen = [i for i, key in enumerate(found) if key is _UNSEEN]
        if len(unseen) > 64 + len(pieces) // 20:  # services added or gone: records moved
            known = dict(zip(last_pieces, last_found, strict=True))
            for i in unseen:
                found[i] = known.get(pieces[i], _UNSEEN)
        decoded: dict[int, Mapping[str, Any]] = {}
        for i in unseen:
            if found[i] is not _UNSEEN:
                continue
            try:
                item = json.loads(b'{' + pieces[i] + b'}')
            except ValueError:
                return self._parse_decoded(raw)
            found[i] = key = _key(item) if item.get('binary') == COMPUTE_BINARY else None
            if key is not None and type(key[4]) is not bool:
                # 1 == True: remembered, such a key would stand for a good one;
                # the whole answer is decoded instead, and _states judges it.
                return self._parse_decoded(raw)
            decoded[i] = item
        self._raw = (pieces, found)
        where = [i for i, key in enumerate(found) if key is not None]
        keys = [found[i] for i in where]
        last_keys, last_result = self._last_read
        if keys == last_keys:
            return (*last_result, keys)

        def item_of(j: int) -> Mapping[str, Any]:
            # Both memories are pure (a piece's key, a key's state), so a key the
            # parser no longer remembers is only a record to decode again.
            i = where[j]
            return decoded[i] if i in decoded else json.loads(b'{' + pieces[i] + b'}')

        result = self._states(keys, lambda j: f'services[{where[j]}]', item_of)
        self._last_read = (keys, result)
        return (*result, keys)

    def _parse_decoded(self, raw: bytes
                       ) -> tuple[ServiceStates, list[str], list[ServiceKey]]:
        self._raw = ([], [])
        try:
            body = json.loads(raw)
        except ValueError:
            raise NovaApiError('GET /os-services: the answer is not JSON') from None
        return self.parse_with_keys(body)

    def parse_with_keys(self, body: Any
                        ) -> tuple[ServiceStates, list[str], list[ServiceKey]]:
        keys, where, items = [], [], []
        for i, item in enumerate(_list_in(body, 'services')):
            if not isinstance(item, dict):
                _require_mapping(item, f'services[{i}]')
            if item.get('binary') != COMPUTE_BINARY:
                continue
            keys.append(_key(item))
            where.append(i)
            items.append(item)
        return (*self._states(keys, lambda j: f'services[{where[j]}]', items.__getitem__),
                keys)

    def parse_keys(self, keys: Any) -> tuple[ServiceStates, list[str]]:
        """The states of keys another parser's :meth:`parse_with_keys` gave
        (validated again: they crossed a process boundary)."""
        if not isinstance(keys, list) or not all(
                isinstance(k, (list, tuple)) and len(k) == len(SERVICE_FIELDS) for k in keys):
            raise NovaApiError(f'expected a list of {len(SERVICE_FIELDS)}-field service keys')
        return self._states([tuple(k) for k in keys], lambda j: f'services key {j}')

    def _states(self, keys: list[ServiceKey], where: Callable[[int], str],
                item_of: Callable[[int], Mapping[str, Any]] | None = None
                ) -> tuple[ServiceStates, list[str]]:
        # A new record is checked whole, heartbeat included, the first time it is seen.
        usual: set[str] = set()
        other: dict[str, ServiceState] = {}
        unknown: list[str] = []
        last, seen, before = self._last, {}, self._last_result.usual
        for j, key in enumerate(keys):
            usual_key = _usual_key(key)
            if usual_key:
                host = key[0]
                if host in before:
                    if host not in other:
                        usual.add(host)
                    continue
                service = None
            else:
                try:
                    # 1 == True: a forced_down of another type must meet _service's check.
                    service = last.get(key) if type(key[4]) is bool else None
                except TypeError:  # an unhashable value: _service says what is wrong with it
                    service = None
            if service is None:
                parsed = _service(item_of(j) if item_of is not None
                                  else dict(zip(SERVICE_FIELDS, key, strict=True)), where(j))
                if parsed is None:
                    unknown.append(key[0])
                    continue
                service = parsed
            if not usual_key:
                seen[key] = service
            host = service.host
            if _usual_state(service):
                if host not in other:
                    usual.add(host)
                continue
            # Two services of one host name (two cells): the more cautious view.
            previous = other.get(host)
            if previous is None and host in usual:
                usual.discard(host)
                previous = ServiceState(host, True)
            other[host] = service if previous is None else _worse(previous, service)
        result = ServiceStates(usual, other)
        self._last, self._last_result = seen, result
        return result, unknown


def _usual_key(key: ServiceKey) -> bool:
    """Whether a key is an up, enabled service's, with no reason (exactly: ``0`` is not
    ``False``, and another type of host is for :func:`_service` to refuse)."""
    return (type(key[0]) is str and key[4] is False and key[3] is None and key[5] is None
            and key[2] == 'up' and key[1] == 'enabled')


def _usual_state(state: ServiceState) -> bool:
    """Whether a state is what :func:`_service` makes of a :func:`_usual_key`."""
    return (state.up and not state.disabled and state.disabled_reason is None
            and not state.forced_down and state.updated_at is None)


def keys_digest(keys: Sequence[ServiceKey]) -> int | None:
    """A digest of a read's keys, for a worker to tell whether a read of its own moved
    any from the last it holds without holding that read's keys (None: a key has a
    value that has no hash). Python's own hash: 64 bits, never compared across
    processes."""
    try:
        return hash((len(keys), tuple(keys)))
    except TypeError:
        return None


def taken_keys(keys: Any) -> Any:
    """Keys another process handed over (JSON lists) as the tuples this process keeps,
    each with its host the string the catalog holds; anything else as it came, for
    :meth:`ServicesParser.parse_keys` to refuse.

    A worker holds the keys it took, and its parser's memory holds them too (``tuple()``
    of a tuple is that tuple): one set of tuples, not two, and no host strings of their
    own. At 50,000 services, taking a read added 18 MB to a process instead of 22. Their
    other strings (status, state, a reason) take a handful of values, each decoded anew
    for every key: one object per value of the read instead (5.4 MB less at 50,000)."""
    if not isinstance(keys, list):
        return keys
    same: dict[Any, Any] = {}
    one = same.setdefault
    width = len(SERVICE_FIELDS)
    try:
        return [(interned(k[0]), one(k[1], k[1]), one(k[2], k[2]), one(k[3], k[3]), *k[4:])
                if type(k) is list and len(k) == width and type(k[0]) is str else k
                for k in keys]
    except TypeError:   # an unhashable field: what the parser refuses, left as it came
        return [(interned(k[0]), *k[1:]) if type(k) is list and k and type(k[0]) is str
                else k for k in keys]


def _key(item: Mapping[str, Any]) -> ServiceKey:
    state = item.get('state')
    return (item.get('host'), item.get('status'), state, item.get('disabled_reason'),
            item.get('forced_down', False), None if state == 'up' else item.get('updated_at'))


_UNSEEN: Any = object()
#: Where one record of a ``GET /os-services`` list ends and the next begins, as
#: Python's ``json.dumps`` (nova-api's) and its compact form write it.
_RECORD_SEPARATORS = (b'}, {', b'},{')
_EMPTY_LIST = b'[]}'
_WHITESPACE = frozenset(b' \t\r\n')
_OPEN, _CLOSE = ord('{'), ord('}')


def _record_pieces(raw: bytes) -> list[bytes] | None:
    """The records of ``{"services": [{...}, ...]}`` without their outer braces, or
    None when the answer is not written so (the caller decodes it whole).

    Indices first and one slice: the answer is megabytes, each copy of it a cost."""
    opening, closing = raw.find(b'['), raw.rfind(b']')
    if opening < 0 or closing < opening or raw[closing + 1:].strip() != b'}':
        return None
    try:
        if json.loads(raw[:opening] + _EMPTY_LIST) != {'services': []}:
            return None
    except ValueError:
        return None
    first = opening + 1
    while first < closing and raw[first] in _WHITESPACE:
        first += 1
    last = closing - 1
    while last > first and raw[last] in _WHITESPACE:
        last -= 1
    if first == closing:
        return []
    if raw[first] != _OPEN or raw[last] != _CLOSE or last == first:
        return None
    inner = raw[first + 1:last]
    for separator in _RECORD_SEPARATORS:
        if separator in inner:
            return inner.split(separator)
    return [inner]


def service_hosts(raw: bytes) -> set[str]:
    """The host of every nova-compute record of a ``GET /os-services`` answer (a down
    cell's too), and nothing else of them (pure).

    For the check that the cell databases hold every compute node: parsed whole,
    the answer is most of what that check cost a worker's memory (12.8 MB and 50,000
    states at 50,000 computes, and what the parser kept of them until the next check,
    an hour on). Each record decoded here is dropped as soon as its host is taken, and
    the hosts are the strings the catalog already holds."""
    pieces = _record_pieces(raw)
    if pieces is not None:
        try:
            return _compute_hosts(json.loads(b'{' + piece + b'}') for piece in pieces)
        except ValueError:   # a piece not an object by itself: decode the whole answer
            pass
    try:
        body = json.loads(raw)
    except ValueError:
        raise NovaApiError('the answer is not JSON') from None
    return _compute_hosts(iter(_list_in(body, 'services')))


def _compute_hosts(items: Iterator[Any]) -> set[str]:
    hosts: set[str] = set()
    for i, item in enumerate(items):
        _require_mapping(item, f'services[{i}]')
        if item.get('binary') == COMPUTE_BINARY:
            hosts.add(interned(_string(item.get('host'), f'services[{i}].host')))
    return hosts


def _service(item: Mapping[str, Any], where: str) -> ServiceState | None:
    """One nova-compute record; None for a service in a down cell (no data)."""
    host = _string(item.get('host'), f'{where}.host')
    status = item.get('status')
    if status not in ('enabled', 'disabled'):
        if str(status).upper() == 'UNKNOWN':  # a down cell (2.69+): no data
            return None
        raise NovaApiError(f'{where}.status: expected enabled or disabled, got {status!r}')
    state = item.get('state')
    if state not in ('up', 'down'):
        raise NovaApiError(f'{where}.state: expected up or down, got {state!r}')
    reason = item.get('disabled_reason')
    if reason is not None and not isinstance(reason, str):
        raise NovaApiError(f'{where}.disabled_reason: expected a string, got {reason!r}')
    forced_down = item.get('forced_down', False)
    if not isinstance(forced_down, bool):
        raise NovaApiError(f'{where}.forced_down: expected true or false, '
                           f'got {forced_down!r}')
    updated_at = _timestamp(item.get('updated_at'), f'{where}.updated_at')
    return ServiceState(
        host=host, up=state == 'up', disabled=status == 'disabled',
        disabled_reason=reason or None, forced_down=forced_down,
        updated_at=None if state == 'up' else updated_at)


def _worse(a: ServiceState, b: ServiceState) -> ServiceState:
    """Two compute services of one host name (two cells): the more cautious view."""
    return ServiceState(
        host=a.host, up=a.up and b.up, disabled=a.disabled or b.disabled,
        disabled_reason=a.disabled_reason or b.disabled_reason,
        forced_down=a.forced_down or b.forced_down,
        updated_at=min((t for t in (a.updated_at, b.updated_at) if t is not None),
                       default=None))


# --------------------------------------------------------------- hypervisors


def parse_hypervisors(body: Any) -> list[HypervisorInfo]:
    """One page of ``GET /os-hypervisors/detail`` (2.53 to 2.87) -> compute nodes."""
    result = []
    for i, item in enumerate(_list_in(body, 'hypervisors')):
        where = f'hypervisors[{i}]'
        _require_mapping(item, where)
        service = item.get('service')
        _require_mapping(service, f'{where}.service')
        version = item.get('hypervisor_version')
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            raise NovaApiError(f'{where}.hypervisor_version: expected an integer, '
                               f'got {version!r}')
        hv_type = item.get('hypervisor_type')
        host_ip = item.get('host_ip')
        result.append(HypervisorInfo(
            provider_uuid=_uuid(item.get('id'), f'{where}.id (a UUID from microversion 2.53)'),
            nodename=_string(item.get('hypervisor_hostname'), f'{where}.hypervisor_hostname'),
            service_host=_string(service.get('host'), f'{where}.service.host'),
            host_ip=host_ip if isinstance(host_ip, str) and host_ip else None,
            hypervisor_type=hv_type if isinstance(hv_type, str) and hv_type else None,
            hypervisor_version=version,
            cpu_info=_cpu_info(item.get('cpu_info'), f'{where}.cpu_info')))
    return result


def next_hypervisor_marker(body: Any) -> str | None:
    """The ``marker`` of the ``next`` link of a hypervisors page; None on the last page."""
    links = body.get('hypervisors_links') if isinstance(body, dict) else None
    for link in links or ():
        if isinstance(link, dict) and link.get('rel') == 'next':
            markers = parse_qs(urlsplit(str(link.get('href', ''))).query).get('marker')
            if not markers:
                raise NovaApiError(f'hypervisors_links: next link without a marker: {link!r}')
            return markers[0]
    return None


def _cpu_info(value: Any, where: str) -> dict[str, Any]:
    if value is None or value == '':
        return {}
    if isinstance(value, str):  # before 2.28 cpu_info was a JSON string
        try:
            value = json.loads(value)
        except ValueError:
            raise NovaApiError(f'{where}: not a JSON object: {value[:80]!r}') from None
    if not isinstance(value, dict):
        raise NovaApiError(f'{where}: expected an object, got {type(value).__name__}')
    return value


# ------------------------------------------------------------------- helpers


def _list_in(body: Any, key: str) -> list:
    if not isinstance(body, dict) or not isinstance(body.get(key), list):
        raise NovaApiError(f'expected a JSON object with a "{key}" list')
    return body[key]


def _require_mapping(value: Any, where: str) -> None:
    if not isinstance(value, dict):
        raise NovaApiError(f'{where}: expected an object, got {type(value).__name__}')


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise NovaApiError(f'{where}: expected a non-empty string, got {value!r}')
    return value


def _uuid(value: Any, where: str) -> str:
    try:
        return str(uuidlib.UUID(_string(value, where)))
    except ValueError:
        raise NovaApiError(f'{where}: expected a UUID, got {value!r}') from None


def _string_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise NovaApiError(f'{where}: expected an object, got {type(value).__name__}')
    result = {}
    for k, v in value.items():
        if not isinstance(v, str):
            raise NovaApiError(f'{where}.{k}: expected a string, got {v!r}')
        result[str(k)] = v
    return result


def _timestamp(value: Any, where: str) -> datetime.datetime | None:
    """Nova's ``2012-10-29T13:42:02.000000`` (naive UTC, sometimes with an offset)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise NovaApiError(f'{where}: expected a timestamp, got {value!r}')
    text = value.strip()
    if text.endswith('Z'):
        text = text[:-1] + '+00:00'
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise NovaApiError(f'{where}: not an ISO 8601 timestamp: {value!r}') from None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=datetime.timezone.utc)
    return moment.astimezone(datetime.timezone.utc)
