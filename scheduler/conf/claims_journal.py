"""``[claims_journal]``: where each worker records its claims before making them."""
from __future__ import annotations

from oslo_config import cfg

GROUP = 'claims_journal'

claims_journal_group = cfg.OptGroup(
    GROUP, title='Claims journal',
    help='Every claim a request makes in Placement is written here before its PUT, and '
         'dropped once the request\'s reply is handed to the transport. A worker that '
         'starts (after a worker was killed, or the whole service, or the machine) gives '
         'back the claims its journal still holds: those of requests nobody answered. '
         'Each is given back only if Placement still shows the consumer exactly as the '
         'claim left it (same allocations, same consumer generation). See '
         'doc/reliability.md.')

claims_journal_opts: list[cfg.Opt] = [
    cfg.StrOpt('directory', default='$state_path/claims-journal',
               help='The directory of the journals: one file per worker of this service '
                    '(``claims-<host>-<worker>.journal``, each with a ``.lock`` beside it). '
                    'Created (mode 0700) if missing; the service refuses to start when it '
                    'cannot be written. Keep it on a local disk that survives a reboot. '
                    'Empty: no journal (a claim made by a worker that dies before it '
                    'answers is then never given back).'),
    cfg.BoolOpt('fsync', default=True,
                help='Sync each record to disk before the claim it covers is made '
                     '(concurrent claims share one sync). Without it the journal survives '
                     'a killed process (the kernel holds what was written) but not a '
                     'crashed machine.'),
    cfg.IntOpt('compact_bytes', default=1 << 20, min=4096,
               help='A journal file is rewritten with only its live records once it has '
                    'grown past this many bytes and most of it is records already over.'),
    cfg.FloatOpt('max_age', default=600.0, min=0.0,
                 help='Claims older than this, in seconds, are not given back when a worker '
                      'finds them in its journal, only logged (WARNING, with the consumer and '
                      'request id) and dropped. Until then nova-conductor is still waiting for '
                      'the answer or has just given up; later, for a resize or live migration '
                      'it has rolled back and the user retried, Placement may show a new claim '
                      'that another scheduler made for the same consumer with the same '
                      'allocations, which cannot be told from the unanswered one (a '
                      're-created consumer starts at the same generation). A worker replaced '
                      'after a kill reads its journal within seconds; this matters only for a '
                      'service, or a machine, that stayed down longer.'),
    cfg.FloatOpt('lock_wait', default=30.0, min=0.0,
                 help='How long, in seconds, a starting worker waits for the journal of its '
                      'worker slot to be let go by another live process (the worker it '
                      'replaces, still finishing its calls) before it refuses to start.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    # A new OptGroup for every ConfigOpts: oslo.config copies a registered group
    # shallowly, so registering the module-level object would share option state
    # (overrides, defaults) between all ConfigOpts instances of the process.
    conf.register_group(cfg.OptGroup(GROUP, title=claims_journal_group.title,
                                     help=claims_journal_group.help))
    conf.register_opts(claims_journal_opts, group=GROUP)


def list_opts() -> dict[cfg.OptGroup, list[cfg.Opt]]:
    return {claims_journal_group: claims_journal_opts}
