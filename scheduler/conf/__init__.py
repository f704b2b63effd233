"""Configuration: registering every option the service reads, and parsing.

One module per option group (``scheduler``, ``filter_scheduler``, ``metrics``,
``placement``, ``nova``, ``pci``, ``cell_database``, ``placement_database``,
``notifications``, ``workarounds``, ``claims_journal``, and ``service`` for
``[DEFAULT]``); ``opts`` feeds oslo-config-generator. Options of oslo.log and
oslo.messaging are registered here too, so a parsed configuration can be validated and
read before any transport exists.
"""
from __future__ import annotations

import importlib
from collections.abc import Sequence
from importlib import metadata

import oslo_messaging.opts
from oslo_config import cfg
from oslo_log import log

from scheduler.conf import (
    cell_database,
    claims_journal,
    filter_scheduler,
    metrics,
    neutron,
    notifications,
    nova,
    opts,
    pci,
    placement,
    placement_database,
    scheduler,
    service,
    upgrade_levels,
    workarounds,
)

PROJECT = 'scheduler'


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register all options of this service and of oslo.log and oslo.messaging.

    Must run before ``conf`` parses its arguments (oslo.log adds CLI options).
    """
    service.register_opts(conf)
    scheduler.register_opts(conf)
    filter_scheduler.register_opts(conf)
    metrics.register_opts(conf)
    placement.register_opts(conf)
    nova.register_opts(conf)
    neutron.register_opts(conf)
    pci.register_opts(conf)
    cell_database.register_opts(conf)
    placement_database.register_opts(conf)
    notifications.register_opts(conf)
    workarounds.register_opts(conf)
    upgrade_levels.register_opts(conf)
    claims_journal.register_opts(conf)
    log.register_options(conf)
    _register_messaging_opts(conf)


def _register_messaging_opts(conf: cfg.ConfigOpts) -> None:
    # oslo.messaging registers its options only when a transport is created.
    # Its list_opts() returns copies of the very same definitions; oslo.config
    # accepts the later registration of the originals because they compare
    # equal. set_defaults() comes first so that the copies carry our exchange.
    opts.set_defaults()
    for group, group_opts in oslo_messaging.opts.list_opts():
        conf.register_opts(group_opts, group=group)
    # oslo.messaging >= 18 reads [oslo_messaging_tracing] and
    # [oslo_messaging_metrics] on every call but registers them only on the
    # global cfg.CONF (and not in list_opts()).
    for module, group in (('oslo_messaging._tracing.client', 'oslo_messaging_tracing'),
                          ('oslo_messaging._metrics.client', 'oslo_messaging_metrics')):
        try:
            options = getattr(importlib.import_module(module), group)
        except (ImportError, AttributeError):  # an oslo.messaging without them
            continue
        conf.register_opts(options, group=group)


def _version() -> str:
    try:
        return metadata.version('placement-scheduler')
    except metadata.PackageNotFoundError:
        return 'unknown'


def parse_args(argv: Sequence[str], conf: cfg.ConfigOpts | None = None,
               default_config_files: list[str] | None = None) -> cfg.ConfigOpts:
    """Register every option on ``conf`` (a new ConfigOpts when None) and parse ``argv``.

    ``argv`` excludes the program name. ``--config-file`` and ``--config-dir``
    work as in every OpenStack service; without them oslo.config looks for
    ``scheduler.conf`` and ``scheduler.conf.d`` in ``~/.scheduler``, ``~``,
    ``/etc/scheduler`` and ``/etc``.
    """
    if conf is None:
        conf = cfg.ConfigOpts()
    register_opts(conf)
    conf(list(argv), project=PROJECT, version=_version(),
         default_config_files=default_config_files)
    return conf


__all__ = ['PROJECT', 'parse_args', 'register_opts']
