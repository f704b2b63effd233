"""Stage ``request_filters``: Nova's request filters edit the spec before the query."""
from __future__ import annotations

from collections.abc import Sequence

from oslo_config import cfg

from scheduler import exceptions as exc
from scheduler import metrics
from scheduler.explain import RequestTrace
from scheduler.objects.spec import RequestSpec
from scheduler.request.filters import AggregateSource, RequestFilter, run_request_filters


def run(request_filters: Sequence[RequestFilter], spec: RequestSpec, sources: AggregateSource,
        conf: cfg.ConfigOpts, trace: RequestTrace) -> None:
    """Run them in order on ``spec``; a filter that refuses the request is a NoValidHost."""
    try:
        with metrics.stage('request_filters'):
            trace.request_filters = run_request_filters(request_filters, spec, sources, conf)
    except exc.RequestFilterFailed as e:
        raise exc.NoValidHost(reason=f'Scheduling failed: {e}') from e
