"""The Placement client: one keystoneauth1 Adapter, bounded retries, typed errors.

Every call goes through :meth:`PlacementClient.request`, which owns the retry
policy (keystoneauth's own retries are switched off so there is exactly one,
bounded, policy), sets the microversion and request-id headers and the
``(connect, read)`` timeout. The typed methods on top of it map Placement's
answers to :mod:`placement_client.models` values or to the errors of
:mod:`placement_client.exceptions`; none of them returns None for failure.
"""
from __future__ import annotations

import logging
import os
import random
import re
import time
import traceback
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import requests
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import token_endpoint
from oslo_config import cfg

from placement_client import json_body
from placement_client.exceptions import (
    BadRequest,
    CapacityExceeded,
    ConsumerGenerationConflict,
    NotFound,
    PlacementAuthError,
    PlacementConfigError,
    PlacementError,
    PlacementUnavailable,
    PlacementVersionTooOld,
    ProviderGenerationConflict,
)
from placement_client.models import (
    AllocationRequest,
    Candidates,
    ConsumerAllocations,
    ProviderSummary,
    ResourceProvider,
    ResourceUsage,
)
from placement_client.query import AllocationCandidatesQuery

LOG = logging.getLogger(__name__)

#: GET /allocation_candidates with ``mappings``, ``root_required`` and ``same_subtree``.
MIN_MICROVERSION = '1.36'
#: The microversion of a_c queries and of claims; Selection.allocation_request_version.
ALLOCATION_CANDIDATES_MICROVERSION = '1.36'
#: GET /allocations/{consumer} reports consumer_generation since 1.28.
CONSUMER_GENERATION_MICROVERSION = '1.28'

_MAPPINGS_IN_PUT = (1, 34)       # PUT /allocations accepts ``mappings``
_CONSUMER_TYPE_REQUIRED = (1, 38)  # PUT /allocations requires ``consumer_type``

# oslo.middleware only accepts an inbound global request id of this form and
# silently drops anything else, so a malformed one would just lose correlation.
_REQUEST_ID_RE = re.compile(
    r'^req-[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$')
_GENERATIONS_RE = re.compile(r'expected (\S+) but got (\S+)')
_CAPACITY_PHRASES = ('would violate inventory constraints', 'exceed the capacity')
_URL_USERINFO_RE = re.compile(r'(//)[^/@\s]+@')


def parse_microversion(version: str) -> tuple[int, int]:
    """``'1.36'`` -> ``(1, 36)``; raises ValueError for anything else."""
    major, minor = version.strip().split('.')
    return int(major), int(minor)


def new_request_id() -> str:
    return f'req-{uuid.uuid4()}'


# ---------------------------------------------------------------- error mapping


def _error_fields(response: requests.Response) -> tuple[str | None, str, str | None]:
    """(code, detail, placement request id) from Placement's error body.

    Placement's detail starts with the generic HTTP explanation followed by a
    blank line; only the part after it is specific, so that is what we keep.
    """
    placement_rid = response.headers.get('x-openstack-request-id')
    try:
        body = response.json()
        error = body['errors'][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return None, (response.text or '').strip()[:500], placement_rid
    detail = str(error.get('detail', '')).split('\n\n')[-1].strip()
    return error.get('code'), detail, error.get('request_id') or placement_rid


def _parse_generation(text: str) -> int | None:
    return None if text in ('None', 'null') else int(text)


def error_from_response(response: requests.Response, *, method: str = '',
                        url: str = '') -> PlacementError:
    """The typed error for a non-success answer (pure; does not raise it).

    409s are told apart by Placement's code *and* detail text: consumer and
    provider generation conflicts share ``placement.concurrent_update``, and
    over-capacity is a ``placement.undefined_code`` (``placement/errors.py``).
    """
    status = response.status_code
    code, detail, placement_rid = _error_fields(response)
    where = f'{method} {url}'.strip()
    message = f'Placement answered {status} to {where}: {detail}' if where else \
        f'Placement answered {status}: {detail}'
    kwargs: dict[str, Any] = {'status': status, 'code': code, 'detail': detail,
                              'request_id': placement_rid}
    if status in (401, 403):
        return PlacementAuthError(message, **kwargs)
    if status == 400:
        return BadRequest(message, **kwargs)
    if status == 404:
        return NotFound(message, **kwargs)
    if status == 406:
        return PlacementVersionTooOld(message, **kwargs)
    if status == 409:
        if code == 'placement.concurrent_update':
            if 'consumer generation conflict' in detail:
                expected = sent = None
                match = _GENERATIONS_RE.search(detail)
                if match:
                    expected = _parse_generation(match.group(1))
                    sent = _parse_generation(match.group(2))
                return ConsumerGenerationConflict(message, expected=expected, sent=sent, **kwargs)
            return ProviderGenerationConflict(message, **kwargs)
        if any(phrase in detail for phrase in _CAPACITY_PHRASES):
            return CapacityExceeded(message, **kwargs)
    return PlacementError(message, **kwargs)


# ----------------------------------------------------------------- construction

#: The option group the client reads unless told otherwise (nova.conf's name for it).
DEFAULT_GROUP = 'placement'


def error_kind(error: BaseException) -> str:
    """A short, bounded label for a failed call: for counting, never for users."""
    if isinstance(error, PlacementUnavailable):
        return 'unavailable'
    if isinstance(error, PlacementAuthError):
        return 'auth'
    if isinstance(error, PlacementError) and error.status is not None:
        return status_kind(error.status)
    return 'other'


def _ignore(kind: str) -> None:
    pass


def status_kind(status: int) -> str:
    return {400: 'bad_request', 401: 'auth', 403: 'auth', 404: 'not_found', 406: 'version',
            409: 'conflict'}.get(status, 'client_error' if 400 <= status < 500 else 'other')


def _load_adapter(conf: cfg.ConfigOpts, group: str) -> ks_adapter.Adapter:
    """The keystoneauth1 Adapter for ``[group]``, loaded the way Nova loads ``[placement]``.

    Refuses a configuration without an auth plugin: keystoneauth would then
    talk to Placement unauthenticated, which must be the operator's explicit
    choice (``auth_type = none``), never an accident of an empty section.
    """
    try:
        auth = ks_loading.load_auth_from_conf_options(conf, group)
    except (ks_exc.ClientException, cfg.Error) as exc:
        raise PlacementConfigError(f'[{group}] auth plugin cannot be loaded: {exc}') from exc
    if auth is None:
        raise PlacementConfigError(
            f'[{group}] auth_type is not set: this client will not talk to Placement '
            'without an auth plugin. Configure keystone credentials (for example '
            'auth_type = password) or, for a Placement without authentication, set '
            'auth_type = none (or admin_token with a token) and an endpoint.')
    if isinstance(auth, token_endpoint.Token) and not auth.token:
        raise PlacementConfigError(f'[{group}] auth_type = admin_token needs [{group}] token')
    try:
        session = ks_loading.load_session_from_conf_options(conf, group, auth=auth)
        if not environment_configures_requests(ca_bundle=False):
            # requests would look for proxies, a CA bundle and a netrc file on
            # every call and find none but the bundle (0.15 ms a call); it is told
            # once. The bundle stands for ``verify=True``, as requests takes it.
            bundle = environment_ca_bundle()
            if bundle and (session.verify is True or session.verify is None):
                session.verify = bundle
            session.session.trust_env = False
        # Our retry policy is the only one (bounded, with jitter, counted in
        # PlacementUnavailable.attempts), and we look at every status ourselves.
        return ks_loading.load_adapter_from_conf_options(
            conf, group, session=session, auth=auth, raise_exc=False,
            connect_retries=0, status_code_retries=0, client_name='placement-scheduler')
    except (TypeError, ValueError, ks_exc.ClientException) as exc:
        raise PlacementConfigError(f'[{group}] invalid session/adapter options: {exc}') from exc


def environment_configures_requests(*, ca_bundle: bool = True) -> bool:
    """Whether requests would take anything from this process's environment:
    a proxy (environment variables, or the system's settings where it has
    them), a CA bundle (:func:`environment_ca_bundle`; not with ``ca_bundle``
    False) or a netrc file (``NETRC``, ``~/.netrc``, ``~/_netrc``)."""
    if urllib.request.getproxies():
        return True
    if ca_bundle and environment_ca_bundle():
        return True
    netrc = os.environ.get('NETRC')
    locations = (netrc,) if netrc is not None else tuple(
        f'~/{name}' for name in requests.utils.NETRC_FILES)
    return any(os.path.exists(os.path.expanduser(path)) for path in locations)


def environment_ca_bundle() -> str | None:
    """The CA bundle requests verifies with when told ``verify=True``
    (``REQUESTS_CA_BUNDLE``, else ``CURL_CA_BUNDLE``), if the environment names one."""
    return os.environ.get('REQUESTS_CA_BUNDLE') or os.environ.get('CURL_CA_BUNDLE') or None


def _redact(text: str) -> str:
    """Drop user:password@ from any URL in an error text before it is logged."""
    return _URL_USERINFO_RE.sub(r'\1***@', text)


@dataclass(frozen=True)
class _Outcome:
    response: requests.Response
    attempts: int
    # An earlier attempt failed in transport, so it may have reached Placement
    # and been applied although we never saw the answer.
    maybe_applied_before: bool


def _clear_frames(error: BaseException) -> None:
    """Drop the locals of the finished frames that ``error`` and the errors it was
    raised from passed through. urllib3 keeps a failed connection's error in a local
    of a frame that error's traceback holds: a cycle, and those frames hold their
    callers', up to the request that claimed, which would then stay resident until
    the collector runs (paused while requests overlap, gc_pause.py). Only text of
    these errors is ever kept or logged."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        traceback.clear_frames(current.__traceback__)
        pending += [current.__cause__, current.__context__]


class _Retryable(Exception):
    def __init__(self, reason: str, *, transport: bool,
                 response: requests.Response | None = None, kind: str = ''):
        super().__init__(reason)
        self.transport = transport
        self.response = response
        self.kind = kind


# ---------------------------------------------------------------------- client


class PlacementClient:
    """Talks to Placement through one keystoneauth1 Adapter; thread-safe."""

    def __init__(self, conf: cfg.ConfigOpts, *, group: str = DEFAULT_GROUP, adapter: Any = None,
                 sleep: Callable[[float], None] = time.sleep,
                 rng: Callable[[], float] = random.random,
                 on_error: Callable[[str], None] | None = None):
        self._conf = conf
        self._group = group
        self._adapter = adapter if adapter is not None else _load_adapter(conf, group)
        self._sleep = sleep
        self._rng = rng
        # Told the kind of every call that fails (error_kind); the scheduler counts them.
        self._on_error = on_error or _ignore
        self.max_microversion: str | None = None

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts, *, group: str = DEFAULT_GROUP,
                  on_error: Callable[[str], None] | None = None) -> PlacementClient:
        """Build from the options in ``[group]`` (keystoneauth's session, auth and
        adapter options, and ``connect_timeout``, ``read_timeout``, ``max_retries``,
        ``retry_backoff``, ``retry_backoff_max``); PlacementConfigError when no auth
        plugin is configured."""
        return cls(conf, group=group, on_error=on_error)

    # ------------------------------------------------------------ low level

    def request(self, method: str, url: str, *, microversion: str | None,
                json: Any = None, params: Any = None,
                request_id: str | None = None) -> requests.Response:
        """One logical call, retried on transport errors and 5xx.

        Returns the final response whatever its status below 500 except 401/403
        (the caller maps it); raises PlacementUnavailable or PlacementAuthError.
        """
        return self._send(method, url, microversion=microversion, json=json, params=params,
                          request_id=request_id).response

    def _send(self, method: str, url: str, *, microversion: str | None, json: Any = None,
              params: Any = None, request_id: str | None = None) -> _Outcome:
        """:meth:`_send_with_retries`, telling ``on_error`` of every call that ends in an
        exception or an error status (what the typed methods then raise)."""
        try:
            outcome = self._send_with_retries(method, url, microversion=microversion,
                                              json=json, params=params, request_id=request_id)
        except PlacementError as e:
            self._on_error(error_kind(e))
            raise
        if outcome.response.status_code >= 400:
            self._on_error(status_kind(outcome.response.status_code))
        return outcome

    def _send_with_retries(self, method: str, url: str, *, microversion: str | None,
                           json: Any = None, params: Any = None,
                           request_id: str | None = None) -> _Outcome:
        opts = self._conf[self._group]
        attempts_allowed = opts.max_retries + 1
        rid = request_id if request_id and _REQUEST_ID_RE.match(request_id) else new_request_id()
        headers = {'Accept': 'application/json', 'X-OpenStack-Request-ID': rid}
        if microversion:
            headers['OpenStack-API-Version'] = f'placement {microversion}'
        maybe_applied = False
        # What the last failed attempt said, not the error itself: its traceback
        # holds this frame, so kept in a local it would make a cycle that keeps the
        # caller's request (its whole view of the hosts) alive until the collector
        # runs, which it does not while requests overlap (gc_pause.py).
        last = ''
        last_kind = ''
        last_status: int | None = None
        for attempt in range(1, attempts_allowed + 1):
            try:
                response = self._attempt(method, url, headers=headers, json=json, params=params,
                                         timeout=(opts.connect_timeout, opts.read_timeout))
                return _Outcome(response, attempt, maybe_applied)
            except _Retryable as exc:
                last, last_kind = str(exc), exc.kind
                last_status = exc.response.status_code if exc.response is not None else None
                maybe_applied = maybe_applied or exc.transport
            if attempt < attempts_allowed:
                delay = self._backoff(attempt)
                LOG.warning('Placement %s %s (request %s) attempt %d/%d failed: %s; '
                            'retrying in %.2fs', method, url, rid, attempt, attempts_allowed,
                            last, delay)
                self._sleep(delay)
        message = (f'Placement unavailable: {method} {url} failed after {attempts_allowed} '
                   f'attempt(s); last error: {last}')
        LOG.error('%s (request %s)', message, rid)
        raise PlacementUnavailable(message, attempts=attempts_allowed, status=last_status,
                                   request_id=rid, last_error=last_kind)

    def _attempt(self, method: str, url: str, *, headers: dict[str, str], json: Any,
                 params: Any, timeout: tuple[float, float]) -> requests.Response:
        """One HTTP exchange; raises _Retryable for what another attempt may cure."""
        try:
            response = self._adapter.request(
                url, method, headers=dict(headers), json=json, params=params, timeout=timeout,
                raise_exc=False, connect_retries=0, status_code_retries=0)
        except (ks_exc.RetriableConnectionFailure, ks_exc.UnknownConnectionError) as exc:
            _clear_frames(exc)
            kind = ('timed out' if isinstance(exc, ks_exc.ConnectTimeout)
                    or 'timed out' in str(exc) else 'connection failed')
            raise _Retryable(_redact(f'{type(exc).__name__}: {exc}'), transport=True,
                             kind=kind) from exc
        except ks_exc.SSLError as exc:
            # A TLS failure is a configuration problem; retrying cannot cure it.
            raise PlacementUnavailable(_redact(f'TLS error talking to Placement: {exc}'),
                                       attempts=1) from exc
        except (ks_exc.EndpointNotFound, ks_exc.DiscoveryFailure) as exc:
            raise PlacementUnavailable(
                f'no Placement endpoint: {exc} (check [{self._group}] endpoint_override, '
                'service_type, valid_interfaces, region_name)', attempts=1) from exc
        except (ks_exc.Unauthorized, ks_exc.Forbidden, ks_exc.AuthorizationFailure,
                ks_exc.AuthPluginException) as exc:
            # Raised while obtaining a token (keystone said no), before Placement.
            raise PlacementAuthError(
                _redact(f'authentication for Placement failed: {exc}')) from exc
        except ks_exc.HttpError as exc:
            # Keystone answered an error while we fetched a token.
            if exc.http_status is not None and exc.http_status >= 500:
                raise _Retryable(f'identity service answered {exc.http_status}',
                                 transport=False) from exc
            raise PlacementError(_redact(f'identity service error: {exc}'),
                                 status=exc.http_status) from exc
        if response.status_code >= 500:
            _, detail, _ = _error_fields(response)
            raise _Retryable(f'HTTP {response.status_code}: {detail[:200]}', transport=False,
                             response=response)
        if response.status_code in (401, 403):
            raise error_from_response(response, method=method, url=url)
        return response

    def _backoff(self, failed_attempt: int) -> float:
        """Full jitter: uniform in [0, min(max, base * 2**(n-1))] after attempt n."""
        opts = self._conf[self._group]
        ceiling = min(opts.retry_backoff_max, opts.retry_backoff * (2 ** (failed_attempt - 1)))
        return self._rng() * ceiling

    # -------------------------------------------------------------- typed API

    def negotiate(self) -> str:
        """Placement's max microversion (GET /); PlacementVersionTooOld below 1.36."""
        response = self.request('GET', '/', microversion=None)
        if response.status_code != 200:
            raise error_from_response(response, method='GET', url='/')
        try:
            versions = _json(response)['versions']
            max_version = max((str(v['max_version']) for v in versions), key=parse_microversion)
        except (KeyError, TypeError, ValueError) as exc:
            raise PlacementError(f'GET / did not answer a Placement version document: {exc}',
                                 status=response.status_code) from exc
        if parse_microversion(max_version) < parse_microversion(MIN_MICROVERSION):
            raise PlacementVersionTooOld(
                f'Placement is too old: this scheduler needs microversion >= '
                f'{MIN_MICROVERSION}, found {max_version}', status=200)
        self.max_microversion = max_version
        LOG.info('Placement offers microversions up to %s', max_version)
        return max_version

    def get_allocation_candidates(self, query: AllocationCandidatesQuery, *,
                                  request_id: str | None = None) -> Candidates:
        mv = ALLOCATION_CANDIDATES_MICROVERSION
        response = self.request('GET', '/allocation_candidates', microversion=mv,
                                params=query.to_params(), request_id=request_id)
        if response.status_code != 200:
            raise error_from_response(response, method='GET', url='/allocation_candidates')
        return Candidates.from_json(_json(response), mv)

    def get_allocations(self, consumer_uuid: str, *,
                        request_id: str | None = None) -> ConsumerAllocations:
        url = f'/allocations/{consumer_uuid}'
        response = self.request('GET', url, microversion=CONSUMER_GENERATION_MICROVERSION,
                                request_id=request_id)
        if response.status_code != 200:
            raise error_from_response(response, method='GET', url=url)
        return ConsumerAllocations.from_json(consumer_uuid, _json(response))

    def put_allocations(self, consumer_uuid: str, allocation_request: AllocationRequest, *,
                        project_id: str | None, user_id: str | None,
                        consumer_generation: int | None,
                        microversion: str = ALLOCATION_CANDIDATES_MICROVERSION,
                        consumer_type: str = 'INSTANCE',
                        request_id: str | None = None) -> None:
        """Claim: replace the consumer's allocations with ``allocation_request``.

        Raises ConsumerGenerationConflict, ProviderGenerationConflict,
        CapacityExceeded, BadRequest, PlacementError or PlacementUnavailable.
        """
        url = f'/allocations/{consumer_uuid}'
        body = allocations_body(allocation_request, project_id=project_id, user_id=user_id,
                                consumer_generation=consumer_generation,
                                microversion=microversion, consumer_type=consumer_type)
        outcome = self._send('PUT', url, microversion=microversion, json=body,
                             request_id=request_id)
        if outcome.response.status_code in (200, 204):
            return
        error = error_from_response(outcome.response, method='PUT', url=url)
        try:
            if isinstance(error, ConsumerGenerationConflict) and outcome.maybe_applied_before:
                # The earlier attempt may have landed and bumped the generation;
                # if the consumer now holds exactly our claim, it did.
                current = self.get_allocations(consumer_uuid, request_id=request_id)
                if _same_claim(current, allocation_request, project_id, user_id):
                    LOG.info('Claim for consumer %s landed on an earlier attempt whose '
                             'answer was lost', consumer_uuid)
                    return
            raise error
        finally:
            # Raised, the error's traceback holds this frame, and through it the
            # caller's: kept in a local here as well, that is a cycle, and the
            # caller's request (its whole view of the hosts) would wait for the
            # collector, which is paused while requests overlap (gc_pause.py).
            del error

    def delete_allocations(self, consumer_uuid: str, *,
                           request_id: str | None = None) -> bool:
        """True when allocations were deleted, False when the consumer had none (404)."""
        url = f'/allocations/{consumer_uuid}'
        response = self.request('DELETE', url, microversion=ALLOCATION_CANDIDATES_MICROVERSION,
                                request_id=request_id)
        if response.status_code == 204:
            return True
        if response.status_code == 404:
            return False
        raise error_from_response(response, method='DELETE', url=url)

    def get_resource_providers(self, *, name: str | None = None, in_tree: str | None = None,
                               request_id: str | None = None) -> list[ResourceProvider]:
        params = [(k, v) for k, v in (('name', name), ('in_tree', in_tree)) if v is not None]
        response = self.request('GET', '/resource_providers', microversion=MIN_MICROVERSION,
                                params=params, request_id=request_id)
        if response.status_code != 200:
            raise error_from_response(response, method='GET', url='/resource_providers')
        return [
            ResourceProvider(uuid=rp['uuid'], name=rp['name'], generation=rp['generation'],
                             root_provider_uuid=rp.get('root_provider_uuid') or rp['uuid'],
                             parent_provider_uuid=rp.get('parent_provider_uuid'))
            for rp in _json(response)['resource_providers']
        ]

    def get_provider_aggregates(self, provider_uuid: str, *,
                                request_id: str | None = None) -> list[str]:
        """The aggregate uuids of a provider; [] for an unknown provider."""
        url = f'/resource_providers/{provider_uuid}/aggregates'
        response = self.request('GET', url, microversion=MIN_MICROVERSION,
                                request_id=request_id)
        if response.status_code == 404:
            return []
        if response.status_code != 200:
            raise error_from_response(response, method='GET', url=url)
        return [str(a) for a in _json(response)['aggregates']]

    def get_provider_summaries(self, root_uuid: str, *,
                               request_id: str | None = None) -> dict[str, ProviderSummary]:
        """Summaries of every provider in the tree rooted at ``root_uuid``, as
        ``GET /allocation_candidates`` would report them, read from each
        provider's inventories, usages and traits; {} for an unknown root.

        For callers that must not ask for candidates (a rebuild check). Capacity
        is ``int((total - reserved) * allocation_ratio)``, Placement's own formula.
        """
        summaries: dict[str, ProviderSummary] = {}
        for rp in self.get_resource_providers(in_tree=root_uuid, request_id=request_id):
            base = f'/resource_providers/{rp.uuid}'
            inventories = self._get_json(f'{base}/inventories', request_id)['inventories']
            usages = self._get_json(f'{base}/usages', request_id)['usages']
            traits = self._get_json(f'{base}/traits', request_id)['traits']
            summaries[rp.uuid] = ProviderSummary(
                uuid=rp.uuid, root_provider_uuid=rp.root_provider_uuid,
                parent_provider_uuid=rp.parent_provider_uuid,
                resources={rc: ResourceUsage(
                    int((inv['total'] - inv.get('reserved', 0)) * inv.get('allocation_ratio', 1.0)),
                    int(usages.get(rc, 0))) for rc, inv in inventories.items()},
                traits=frozenset(traits))
        return summaries

    def _get_json(self, url: str, request_id: str | None) -> Mapping[str, Any]:
        response = self.request('GET', url, microversion=MIN_MICROVERSION, request_id=request_id)
        if response.status_code != 200:
            raise error_from_response(response, method='GET', url=url)
        return _json(response)


# ----------------------------------------------------------------- helpers


def allocations_body(allocation_request: AllocationRequest, *, project_id: str | None,
                     user_id: str | None, consumer_generation: int | None, microversion: str,
                     consumer_type: str) -> dict[str, Any]:
    """The PUT /allocations/{consumer} body valid at ``microversion`` (pure)."""
    mv = parse_microversion(microversion)
    wire = allocation_request.to_json()
    body: dict[str, Any] = {
        'allocations': wire['allocations'],
        'project_id': project_id,
        'user_id': user_id,
        'consumer_generation': consumer_generation,
    }
    if mv >= _MAPPINGS_IN_PUT and 'mappings' in wire:
        body['mappings'] = wire['mappings']
    if mv >= _CONSUMER_TYPE_REQUIRED:
        body['consumer_type'] = consumer_type
    return body


def _same_claim(current: ConsumerAllocations, sent: AllocationRequest, project_id: str | None,
                user_id: str | None) -> bool:
    held = {rp: dict(res) for rp, res in current.allocations.items()}
    wanted = {rp: dict(res) for rp, res in sent.allocations.items()}
    return (held == wanted and current.project_id in (None, project_id)
            and current.user_id in (None, user_id))


def decode_json(content: bytes) -> Any:
    """A response body as Python values (:func:`placement_client.json_body.loads`).

    The caller decides about the garbage collector: the scheduler pauses it for
    the whole of a request (scheduler/memory/), not call by call."""
    return json_body.loads(content)


def _json(response: requests.Response) -> Mapping[str, Any]:
    try:
        return decode_json(response.content)
    except ValueError as exc:
        raise PlacementError(f'Placement answered {response.status_code} with a body that '
                             f'is not JSON', status=response.status_code) from exc
