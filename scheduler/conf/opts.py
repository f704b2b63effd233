"""Hooks for oslo-config-generator.

``list_opts`` is the ``oslo.config.opts`` entry point ``placement_scheduler``;
``set_defaults`` is the ``oslo.config.opts.defaults`` entry point of the same
name, which the generator calls before it asks the libraries for their options,
so the sample shows the defaults this service runs with (Nova's exchange).
"""
from __future__ import annotations

import oslo_messaging
from oslo_config import cfg

from scheduler.conf import (
    cell_database,
    claims_journal,
    filter_scheduler,
    metrics,
    neutron,
    notifications,
    nova,
    pci,
    placement,
    placement_database,
    scheduler,
    service,
    upgrade_levels,
    workarounds,
)

# Nova's exchange: conductor sends to "nova", not oslo.messaging's "openstack".
CONTROL_EXCHANGE = 'nova'

_MODULES = (service, scheduler, filter_scheduler, metrics, placement, nova, neutron, pci,
            cell_database, placement_database, notifications, workarounds, claims_journal,
            upgrade_levels)


def set_defaults() -> None:
    """Set this service's defaults for options owned by libraries."""
    oslo_messaging.set_transport_defaults(control_exchange=CONTROL_EXCHANGE)


def list_opts() -> list[tuple[str | cfg.OptGroup, list[cfg.Opt]]]:
    """Every option this service defines, by group (libraries list their own)."""
    result: list[tuple[str | cfg.OptGroup, list[cfg.Opt]]] = []
    for module in _MODULES:
        result.extend((group, list(opts)) for group, opts in module.list_opts().items())
    return result
