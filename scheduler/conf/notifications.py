"""``[notifications]``: which scheduler notifications are sent, with Nova 34's names.

Whether any are sent at all is oslo.messaging's ``[oslo_messaging_notifications]
driver`` (empty: none, as in Nova).
"""
from __future__ import annotations

from oslo_config import cfg

GROUP = 'notifications'

notifications_group = cfg.OptGroup(
    GROUP, title='Notifications',
    help='The scheduler.select_destinations.start/.end notifications, sent as Nova sends '
         'them when a notification driver is configured in '
         '[oslo_messaging_notifications] driver.')

notification_opts = [
    cfg.StrOpt('notification_format', default='unversioned',
               choices=[('both', 'Both the legacy unversioned and the new versioned '
                                 'notifications are emitted'),
                        ('versioned', 'Only the new versioned notifications are emitted'),
                        ('unversioned', 'Only the legacy unversioned notifications are '
                                        'emitted')],
               help='Specifies which notification format shall be emitted by nova.\n\n'
                    'Unversioned: publisher ``scheduler.<host>``, payload '
                    '``{"request_spec": <legacy request spec>}``, on the topics of '
                    '``[oslo_messaging_notifications] topics``. Versioned: publisher '
                    '``nova-scheduler:<host>``, a ``RequestSpecPayload``, on '
                    '``versioned_notifications_topics``.'),
    cfg.ListOpt('versioned_notifications_topics', default=['versioned_notifications'],
                help='Specifies the topics for the versioned notifications issued by nova.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    # A new OptGroup for every ConfigOpts (see scheduler.conf.scheduler.register_opts).
    conf.register_group(cfg.OptGroup(GROUP, title=notifications_group.title,
                                     help=notifications_group.help))
    conf.register_opts(notification_opts, group=GROUP)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {notifications_group: notification_opts}
