"""``[upgrade_levels]``: the newest Nova release whose object versions replies may use."""
from __future__ import annotations

from oslo_config import cfg

from scheduler.objects.nova_releases import RELEASES

GROUP = 'upgrade_levels'
AUTO = 'auto'

upgrade_levels_group = cfg.OptGroup(
    GROUP, title='Upgrade levels',
    help='Caps on the versions this service answers with while Nova services of '
         'different releases call it.')

upgrade_levels_opts: list[cfg.Opt] = [
    cfg.StrOpt('reply_objects', default=AUTO,
               choices=[(AUTO, "each reply at the versions its request's own objects show "
                               'the caller reads')]
               + [(r.series, f'no newer than nova {r.nova} reads') for r in RELEASES],
               help='The Nova release (series) whose object versions replies may use at '
                    'most.\n\n'
                    'nova-conductor deserialises the Selection objects of a '
                    'select_destinations reply with its own object classes, and fails on a '
                    'version it does not know. With ``auto`` each reply is written at the '
                    'versions the calling release reads, told from the versions of the '
                    'RequestSpec and image properties it sent; a request older than every '
                    'supported release is answered at the oldest versions '
                    '(Selection 1.0). Set a series (the oldest release of nova-conductor '
                    'still running) to cap every reply at what that release reads as '
                    'well, e.g. during a Nova upgrade whose new release this service '
                    'cannot yet tell from the old one.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    # A new OptGroup for every ConfigOpts (see scheduler/conf/workarounds.py).
    conf.register_group(cfg.OptGroup(GROUP, title=upgrade_levels_group.title,
                                     help=upgrade_levels_group.help))
    conf.register_opts(upgrade_levels_opts, group=GROUP)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {upgrade_levels_group: upgrade_levels_opts}
