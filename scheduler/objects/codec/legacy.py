"""The legacy form of RPC 4.0-4.2: ``request_spec`` and ``filter_properties`` dicts
in, ``{host, nodename, limits}`` dicts out (``return_objects`` False)."""
from __future__ import annotations

import copy
from typing import Any

from scheduler.objects.codec.bounded import (
    NAME_KEY,
    Conv,
    DecodeLimits,
    check_depth,
    encode_str,
)
from scheduler.objects.codec.request_spec import (
    NO_NETWORK_METADATA,
    RequestSpecReader,
    group_policies,
)
from scheduler.objects.codec.selection import limits_to_dict
from scheduler.objects.selection import Selection
from scheduler.objects.spec import InstanceGroup, RequestSpec


def decode_legacy_request(request_spec: Any, filter_properties: Any, *,
                          limits: DecodeLimits = DecodeLimits()) -> RequestSpec:
    """The legacy dicts of RPC 4.0-4.2, as Nova's ``RequestSpec.from_primitives`` reads them.

    Unlike Nova, a server group rebuilt from ``group_*`` keys keeps ``policies``
    (Nova's ``RequestSpec._populate_group_info`` drops it, and ServerGroupAffinityFilter,
    which reads ``policies``, then crashes: ``nova/scheduler/filters/affinity_filter.py``).
    """
    check_depth(request_spec, 'request_spec', limits.max_depth)
    check_depth(filter_properties, 'filter_properties', limits.max_depth)
    return LegacyReader(limits).legacy_request(request_spec, filter_properties)



def encode_legacy_destination(sel: Selection) -> dict[str, Any]:
    """Nova's ``Selection.to_dict()``: the reply when ``return_objects`` is False."""
    limits = {} if sel.limits is None else limits_to_dict(sel.limits)
    return {'host': encode_str(sel.service_host, 'service_host'),
            'nodename': encode_str(sel.nodename, 'nodename'),
            'limits': limits}



class LegacyReader(RequestSpecReader):
    """The readers of the legacy dicts, on top of the RequestSpec readers."""

    def legacy_request(self, request_spec: Any, filter_properties: Any) -> RequestSpec:
        rs_path, fp_path = 'request_spec', 'filter_properties'
        rs = self.dict_(request_spec, rs_path)
        fp = {} if filter_properties is None else self.dict_(filter_properties, fp_path)
        image = rs.get('image')
        props = self.take(rs, 'instance_properties', rs_path, self.instance_properties,
                          default=dict, nullable=True, null=dict)
        props_path = f'{rs_path}.instance_properties'

        def prop(key: str, conv: Conv) -> Any:
            return self.take(props, key, props_path, conv, default=None, nullable=True)

        def filter_prop(key: str, conv: Conv) -> Any:
            return self.take(fp, key, fp_path, conv, default=None, nullable=True)

        return RequestSpec(
            flavor=self.take(rs, 'instance_type', rs_path,
                             lambda v, p: self.flavor(v, p, plain_ok=True)),
            # Nova builds an empty ImageMeta from a missing image; we say "no image".
            image=(self.image(image, f'{rs_path}.image', legacy=True)
                   if image not in (None, {}) else None),
            instance_uuid=prop('uuid', self.uuid),
            num_instances=self.take(rs, 'num_instances', rs_path, self.num_instances,
                                    default=1),
            project_id=prop('project_id', self.string),
            user_id=prop('user_id', self.string),
            availability_zone=prop('availability_zone', self.string),
            numa_topology=prop('numa_topology', self.numa_topology),
            pci_requests=prop('pci_requests', self.pci_requests),
            ignore_hosts=filter_prop('ignore_hosts', self.str_list),
            force_hosts=filter_prop('force_hosts', self.str_list),
            force_nodes=filter_prop('force_nodes', self.str_list),
            requested_destination=filter_prop('requested_destination', self.destination),
            instance_group=self.legacy_group(fp, fp_path),
            scheduler_hints=self.take(fp, 'scheduler_hints', fp_path, self.hints,
                                      default=dict, nullable=True, null=dict),
            network_metadata=copy.deepcopy(NO_NETWORK_METADATA),
        )

    def instance_properties(self, value: Any, path: str) -> dict:
        if isinstance(value, dict) and NAME_KEY in value:
            return self.obj(value, path, 'Instance')
        return self.dict_(value, path)

    def legacy_group(self, fp: dict, path: str) -> InstanceGroup | None:
        """Nova's ``RequestSpec._populate_group_info``."""
        if fp.get('instance_group') is not None:
            return self.instance_group(fp['instance_group'], f'{path}.instance_group')
        if fp.get('group_updated') is not True:
            return None

        def strings(key: str) -> list[str]:
            values = self.take(fp, key, path, self.str_list, default=list, nullable=True,
                               null=list)
            return list(dict.fromkeys(values))  # sets on the legacy wire

        policy, policies = group_policies(None, strings('group_policies'))
        return InstanceGroup(
            uuid=self.take(fp, 'group_uuid', path, self.string, default=None, nullable=True),
            policy=policy, policies=policies,
            hosts=strings('group_hosts'), members=strings('group_members'))

    # -- casts and replies ------------------------------------------------------------
