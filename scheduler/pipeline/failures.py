"""What a caller, and the log, may read of a failure (doc/design.md#reasons-a-user-reads)."""
from __future__ import annotations

import logging
import re

from oslo_config import cfg

from placement_client import exceptions as pexc
from scheduler import exceptions as exc
from scheduler import explain
from scheduler.context import RequestContext
from scheduler.exceptions import FilterError, WeigherError

LOG = logging.getLogger(__name__)

UUID_RE = re.compile(r'[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?'
                     r'[0-9a-fA-F]{12}')


def failure_reason(conf: cfg.ConfigOpts, trace: explain.RequestTrace) -> str:
    """The NoValidHost reason for ``trace``: Nova's words, or the summary that names
    no host unless ``[scheduler] explain_host_names`` is on."""
    if conf.scheduler.no_valid_host_reason == 'nova':
        return explain.nova_failure_reason(trace)
    return explain.failure_reason(trace, host_names=conf.scheduler.explain_host_names)


def plugin_failure(error: Exception) -> exc.NoValidHost:
    """A filter or weigher that crashes is a bug in that plugin; the caller gets a
    NoValidHost naming it (Nova would send the raw exception), the log the traceback."""
    LOG.error('scheduler plugin failed: %s', error, exc_info=error)
    # The plugin's own text may quote host data: the caller learns which plugin.
    if isinstance(error, FilterError):
        which = f'filter {error.filter_name}'
    elif isinstance(error, WeigherError):
        which = f'weigher {error.weigher_name}'
    else:
        which = type(error).__name__
    return exc.NoValidHost(reason=f'{which} failed (a scheduler plugin failed; the '
                                  f'scheduler log has the details)')


def placement_failure(error: pexc.PlacementError) -> str:
    """What a caller may read of a Placement failure: its status and error code,
    never its text (which can quote URLs, provider or aggregate uuids)."""
    if error.status:
        parts = [f'HTTP {error.status}']
    elif isinstance(error, pexc.PlacementUnavailable):
        parts = [error.last_error or 'no answer']
    else:
        parts = [type(error).__name__]
    if error.code:
        parts.append(error.code)
    return ', '.join(parts)


def log_placement_failure(context: RequestContext, what: str,
                          error: pexc.PlacementError) -> None:
    LOG.warning('request %s: %s: %s', context.request_id, what, short(error, 500))


def short(error: object, limit: int = 200) -> str:
    text = ' '.join(str(error).split())
    return text if len(text) <= limit else text[:limit - 3] + '...'
