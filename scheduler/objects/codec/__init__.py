"""Nova-object primitives <-> the scheduler's dataclasses, validated and bounded.

One module per job, encoding beside decoding:

* :mod:`.bounded` — the bounded readers every decoder is built on, the limits,
  the error paths and the envelope;
* :mod:`.request_spec` and :mod:`.request_spec_encoder` — RequestSpec 1.x and the
  objects it holds;
* :mod:`.legacy` — the dicts of RPC 4.0-4.2 and their answer;
* :mod:`.selection` — Selection 1.0-1.1 and SchedulerLimits 1.0, written at the
  version the caller reads;
* :mod:`.sent_versions` — the object versions a request was sent with, which
  tell which Nova release sent it (:mod:`scheduler.objects.nova_releases`);
* :mod:`.host_data` — aggregates and instance lists from the casts.

Decoding is lenient where Nova releases legitimately differ and strict about
what the scheduler acts on:

* lenient: unknown fields are ignored, any minor version of a known major is
  accepted (older ones simply lack fields), ``nova_object.changes`` is never
  read, an absent field takes Nova's default, an explicit ``null`` reads as
  ``None`` (or as an empty collection where the dataclass holds one);
* strict: wrong types, a namespace other than ``nova``, another object where a
  specific one is expected, an unknown major version, missing required fields,
  amounts outside ``[0, max_amount]``, malformed or duplicate instance UUIDs,
  and everything beyond :class:`DecodeLimits`.

Every rejection is :class:`~scheduler.exceptions.InvalidInput` whose reason
starts with the field path (``spec_obj.flavor.extra_specs: more than 256
entries``). Reasons never contain field values (an image property or a cell's
``transport_url`` may carry secrets): only object names, versions, malformed
UUIDs and the keys of free-form dicts (extra specs, hints) are quoted,
truncated, and a reason is at most 300 characters.

Nesting is checked iteratively over the whole input before any recursive
decoding, so a hostile payload cannot exhaust the stack; the decoders then
recurse at most ``max_depth`` levels.

Encoding produces exactly what Nova's conductor deserializes: Selection (1.1,
or 1.0 for a caller that reads no newer) with a nested SchedulerLimits 1.0,
including ``nova_object.changes`` listing every field, as Nova's own
``obj_to_primitive`` does for objects built by their constructor
(oslo.versionedobjects reads ``changes`` with ``primitive.get(..., [])``, so it
would also tolerate its absence; sending it keeps our replies indistinguishable
from nova-scheduler's).
"""
from scheduler.objects.codec.bounded import DecodeLimits, EncodeError, unwrap
from scheduler.objects.codec.host_data import (
    decode_aggregate,
    decode_aggregates,
    decode_instance_uuids_from_instance_list,
    validate_instance_uuids,
)
from scheduler.objects.codec.legacy import decode_legacy_request, encode_legacy_destination
from scheduler.objects.codec.request_spec import decode_request_spec
from scheduler.objects.codec.request_spec_encoder import (
    IMAGE_META_PROPS_FIELDS,
    encode_network_metadata,
    encode_request_spec,
)
from scheduler.objects.codec.selection import decode_selection, encode_selection
from scheduler.objects.codec.sent_versions import sent_versions

__all__ = [
    'IMAGE_META_PROPS_FIELDS', 'DecodeLimits', 'EncodeError', 'decode_aggregate',
    'decode_aggregates', 'decode_instance_uuids_from_instance_list', 'decode_legacy_request',
    'decode_request_spec', 'decode_selection', 'encode_legacy_destination',
    'encode_network_metadata', 'encode_request_spec', 'encode_selection', 'sent_versions',
    'unwrap', 'validate_instance_uuids',
]
