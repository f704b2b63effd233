"""``scheduler.select_destinations.start`` / ``.end``, as Nova sends them.

Nova (``SchedulerManager.select_destinations``) wraps scheduling in two
notifications of each enabled
format: the legacy one (publisher ``scheduler.<host>``, payload
``{"request_spec": <legacy request spec dict>}``) and the versioned
``SelectDestinationsNotification`` (publisher ``nova-scheduler:<host>``, a
``RequestSpecPayload``). ``.end`` follows only a request that succeeded; a
NoValidHost gets no ``.end``, as in Nova.

Differences from Nova, on purpose:

* Notifying never fails or stalls a request: errors are logged and
  swallowed, and the driver's retries are bounded (Nova's default
  ``[oslo_messaging_notifications] retry = -1`` retries forever, which would
  hold the request while the broker is away).
* The message context carries no auth token (Nova's carries the user's
  token to every notification consumer), and a requested destination's
  cell is reduced to uuid, name and disabled, as Nova's CellMappingPayload
  2.0 does: its transport URL and database connection never leave.
"""
from __future__ import annotations

import logging
from typing import Any

import oslo_messaging as messaging
from oslo_config import cfg

from scheduler.context import RequestContext
from scheduler.objects.spec import Destination, Flavor, ImageMeta, InstanceGroup, RequestSpec

LOG = logging.getLogger(__name__)

EVENT_START = 'scheduler.select_destinations.start'
EVENT_END = 'scheduler.select_destinations.end'
#: Send attempts when the configuration says "forever" (retry = -1).
BOUNDED_RETRY = 3

# Context keys a notification consumer never gets.
_SECRET_CONTEXT_KEYS = frozenset({'auth_token', 'service_catalog', 'user_auth_plugin',
                                  'auth_token_info'})


class NotificationSerializer(messaging.NoOpSerializer):
    """Payloads are primitives already; the context loses its secrets."""

    def serialize_context(self, context: Any) -> dict[str, Any]:
        values = context.to_dict() if isinstance(context, RequestContext) else dict(context or {})
        return {k: v for k, v in values.items() if k not in _SECRET_CONTEXT_KEYS}


# ------------------------------------------------------------------ payloads (pure)

def _envelope(name: str, version: str, data: dict[str, Any]) -> dict[str, Any]:
    return {'nova_object.name': name, 'nova_object.namespace': 'nova',
            'nova_object.version': version, 'nova_object.data': data}


def _flavor_fields(flavor: Flavor) -> dict[str, Any]:
    return {'flavorid': flavor.flavorid, 'name': flavor.name, 'memory_mb': flavor.memory_mb,
            'vcpus': flavor.vcpus, 'root_gb': flavor.root_gb,
            'ephemeral_gb': flavor.ephemeral_gb, 'swap': flavor.swap,
            'rxtx_factor': flavor.rxtx_factor, 'vcpu_weight': flavor.vcpu_weight,
            'disabled': flavor.disabled, 'is_public': flavor.is_public,
            'description': flavor.description, 'extra_specs': dict(flavor.extra_specs)}


def _image_fields(image: ImageMeta) -> dict[str, Any]:
    return {'id': image.id, 'name': image.name, 'status': image.status,
            'visibility': image.visibility, 'disk_format': image.disk_format,
            'container_format': image.container_format, 'min_ram': image.min_ram,
            'min_disk': image.min_disk, 'size': image.size, 'virtual_size': image.virtual_size,
            'owner': image.owner}


def legacy_request_spec(spec: RequestSpec) -> dict[str, Any]:
    """Nova's ``RequestSpec.to_legacy_request_spec_dict()`` as plain JSON values."""
    image: dict[str, Any] = {}
    if spec.image is not None:
        image = {**_image_fields(spec.image), 'properties': dict(spec.image.properties)}
    flavor = spec.flavor
    instance = {'numa_topology': spec.numa_topology, 'pci_requests': spec.pci_requests,
                'project_id': spec.project_id, 'user_id': spec.user_id,
                'availability_zone': spec.availability_zone, 'uuid': spec.instance_uuid,
                'root_gb': flavor.root_gb, 'ephemeral_gb': flavor.ephemeral_gb,
                'memory_mb': flavor.memory_mb, 'vcpus': flavor.vcpus}
    return {'image': image, 'instance_properties': instance,
            'instance_type': {'id': flavor.id, **_flavor_fields(flavor)},
            'num_instances': spec.num_instances}


def _destination_payload(dest: Destination) -> dict[str, Any]:
    data: dict[str, Any] = {'aggregates': list(dest.aggregates)
                            if dest.aggregates is not None else None}
    if dest.host is not None:
        data['host'] = dest.host
    if dest.node is not None:
        data['node'] = dest.node
    if dest.cell is not None:
        # CellMappingPayload 2.0: Nova removed transport_url and database_connection.
        data['cell'] = _envelope('CellMappingPayload', '2.0', {
            'uuid': dest.cell.uuid, 'name': dest.cell.name, 'disabled': dest.cell.disabled})
    return _envelope('DestinationPayload', '1.0', data)


def _group_payload(group: InstanceGroup) -> dict[str, Any]:
    return _envelope('ServerGroupPayload', '1.1', {
        'uuid': group.uuid, 'name': group.name, 'user_id': group.user_id,
        'project_id': group.project_id, 'policy': group.policy,
        'policies': list(group.policies), 'rules': dict(group.rules),
        'members': list(group.members), 'hosts': list(group.hosts)})


def request_spec_payload(spec: RequestSpec) -> dict[str, Any]:
    """A ``RequestSpecPayload`` 1.1 primitive of what the scheduler decoded.

    Fields this service does not decode (``retry``, ``security_groups``) are
    sent empty; NUMA topology and PCI requests as the caller sent them. The
    nested payloads carry the versions of Nova's payload classes with these
    fields, except ``ImageMetaPropsPayload``, whose version tracks Nova's
    ImageMetaProps release by release: it is sent as 1.0 with the properties
    the request carried.
    """
    image = None
    if spec.image is not None:
        image = _envelope('ImageMetaPayload', '1.0', {
            **_image_fields(spec.image),
            # Not part of what a RequestSpec carries to the scheduler.
            'checksum': None, 'created_at': None, 'updated_at': None, 'tags': None,
            'direct_url': None, 'protected': None,
            'properties': _envelope('ImageMetaPropsPayload', '1.0',
                                    dict(spec.image.properties))})
    return _envelope('RequestSpecPayload', '1.1', {
        'instance_uuid': spec.instance_uuid, 'project_id': spec.project_id,
        'user_id': spec.user_id, 'availability_zone': spec.availability_zone,
        'num_instances': spec.num_instances,
        'flavor': _envelope('FlavorPayload', '1.4', {**_flavor_fields(spec.flavor),
                                                      'projects': None}),
        'image': image, 'image_meta': None,
        'force_hosts': spec.force_hosts[0] if spec.force_hosts else None,
        'force_nodes': spec.force_nodes[0] if spec.force_nodes else None,
        'ignore_hosts': list(spec.ignore_hosts) if spec.ignore_hosts is not None else None,
        'instance_group': (_group_payload(spec.instance_group)
                           if spec.instance_group is not None else None),
        'numa_topology': spec.numa_topology, 'pci_requests': spec.pci_requests,
        'requested_destination': (_destination_payload(spec.requested_destination)
                                  if spec.requested_destination is not None else None),
        'retry': None,
        'scheduler_hints': {k: [str(v) for v in vs] if isinstance(vs, list) else [str(vs)]
                            for k, vs in spec.scheduler_hints.items()},
        'security_groups': [],
    })


# ------------------------------------------------------------------ sending

class SelectDestinationsNotifier:
    """Sends the start/end notifications of the enabled formats; never raises."""

    def __init__(self, conf: cfg.ConfigOpts, transport: messaging.Transport):
        retry = conf.oslo_messaging_notifications.retry
        retry = BOUNDED_RETRY if retry is None or retry < 0 else retry
        fmt = conf.notifications.notification_format
        serializer = NotificationSerializer()
        self._legacy: messaging.Notifier | None = None
        self._versioned: messaging.Notifier | None = None
        if fmt in ('unversioned', 'both'):
            self._legacy = messaging.Notifier(transport, publisher_id=f'scheduler.{conf.host}',
                                              serializer=serializer, retry=retry)
        if fmt in ('versioned', 'both'):
            self._versioned = messaging.Notifier(
                transport, publisher_id=f'nova-scheduler:{conf.host}', serializer=serializer,
                retry=retry, topics=list(conf.notifications.versioned_notifications_topics))

    @property
    def enabled(self) -> bool:
        return any(n is not None and n.is_enabled() for n in (self._legacy, self._versioned))

    def start(self, context: RequestContext, spec: RequestSpec) -> None:
        self._notify(context, EVENT_START, spec)

    def end(self, context: RequestContext, spec: RequestSpec) -> None:
        self._notify(context, EVENT_END, spec)

    def _notify(self, context: RequestContext, event_type: str, spec: RequestSpec) -> None:
        for notifier, payload in ((self._legacy, lambda: {'request_spec':
                                                          legacy_request_spec(spec)}),
                                  (self._versioned, lambda: request_spec_payload(spec))):
            if notifier is None or not notifier.is_enabled():
                continue
            try:
                notifier.info(context, event_type, payload())
            except Exception as e:  # a notification is never worth a failed request
                LOG.warning('request %s: could not send %s (%s: %s)', context.request_id,
                            event_type, type(e).__name__, str(e)[:200])


def from_conf(conf: cfg.ConfigOpts,
              transport: messaging.Transport | None = None) -> SelectDestinationsNotifier | None:
    """The notifier when ``[oslo_messaging_notifications] driver`` is set, else None.

    ``transport`` defaults to oslo.messaging's notification transport
    (``[oslo_messaging_notifications] transport_url``, else ``[DEFAULT]
    transport_url``).
    """
    drivers = [d for d in conf.oslo_messaging_notifications.driver if d != 'noop']
    if not drivers:
        return None
    if transport is None:
        transport = messaging.get_notification_transport(conf)
    return SelectDestinationsNotifier(conf, transport)
