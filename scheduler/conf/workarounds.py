"""``[workarounds]``: the Nova 34 workaround the scheduler reads, with Nova's name and default."""
from __future__ import annotations

from oslo_config import cfg

GROUP = 'workarounds'

workarounds_group = cfg.OptGroup(
    GROUP, title='Workarounds',
    help='Switches for behaviour Nova keeps for compatibility. Only the options a scheduler '
         'reads are defined here; the rest of the ``[workarounds]`` section of a nova.conf is '
         'accepted and ignored.')

workarounds_opts: list[cfg.Opt] = [
    cfg.BoolOpt('disable_fallback_pcpu_query', default=False,
                deprecated_for_removal=True, deprecated_since='20.0.0',
                help='Disable fallback request for VCPU allocations when using pinned '
                     'instances.\n\n'
                     'A request for pinned CPUs (``hw:cpu_policy=dedicated``) asks Placement for '
                     '``PCPU``. Compute nodes that do not report ``PCPU`` inventory yet (not '
                     'configured with ``[compute] cpu_dedicated_set``) can only serve it as '
                     '``VCPU``, so the scheduler makes a second, ``VCPU``-based request and '
                     'adds its candidates. Set this to True once every compute node reports '
                     '``PCPU``: the second request is then skipped.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    # A new OptGroup for every ConfigOpts: oslo.config copies a registered group
    # shallowly, so registering the module-level object would share option state
    # (overrides, defaults) between all ConfigOpts instances of the process.
    conf.register_group(cfg.OptGroup(GROUP, title=workarounds_group.title,
                                     help=workarounds_group.help))
    conf.register_opts(workarounds_opts, group=GROUP)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {workarounds_group: workarounds_opts}
