"""``[pci]``: the PCI aliases flavors name (Nova's option, Nova's JSON format)."""
from __future__ import annotations

from oslo_config import cfg

GROUP = 'pci'

pci_group = cfg.OptGroup(
    GROUP, title='PCI passthrough',
    help='PCI aliases, as in nova.conf. Nova\'s API turns a flavor\'s '
         '``pci_passthrough:alias`` into the PCI requests of the RequestSpec; this '
         'service reads the aliases only for a request that names an alias but carries '
         'no PCI request for it (a spec built by hand or for a simulation).')

pci_opts: list[cfg.Opt] = [
    cfg.MultiStrOpt('alias', default=[], deprecated_name='pci_alias',
                    deprecated_group='DEFAULT',
                    help='An alias for a PCI passthrough device requirement.\n\n'
                         'One JSON object per value, as in Nova: ``name`` (required), '
                         '``vendor_id`` and ``product_id`` (4 hex digits), ``device_type`` '
                         '(``type-PCI``, ``type-PF``, ``type-VF`` or ``vdpa``), '
                         '``numa_policy`` (``required``, ``legacy``, ``preferred`` or '
                         '``socket``), ``resource_class``, ``traits``, '
                         '``live_migratable``. Several values with the same name are '
                         'alternatives (any of them matches); they must agree on '
                         '``device_type`` and ``numa_policy``. A flavor asks for devices '
                         'with ``pci_passthrough:alias=<name>:<count>[,...]``.\n\n'
                         'Example: ``alias = {"name": "QuickAssist", "vendor_id": "8086", '
                         '"product_id": "0443", "device_type": "type-PCI", '
                         '"numa_policy": "required"}``'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    # A new OptGroup for every ConfigOpts (see scheduler.conf.workarounds).
    conf.register_group(cfg.OptGroup(GROUP, title=pci_group.title, help=pci_group.help))
    conf.register_opts(pci_opts, group=GROUP)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {pci_group: pci_opts}
