"""oslo.messaging serializer: contexts in and out; entities stay primitives.

Arguments are decoded (and validated) by the endpoint, not here, so that a
malformed argument becomes an error the caller can read instead of a failure
inside the dispatcher; results are encoded by the endpoint for the same
reason. This serializer only converts the context.
"""
from __future__ import annotations

from typing import Any

import oslo_messaging as messaging

from scheduler.context import RequestContext


class ContextSerializer(messaging.NoOpSerializer):
    def serialize_context(self, context: Any) -> dict[str, Any]:
        if isinstance(context, RequestContext):
            return context.to_dict()
        return dict(context or {})

    def deserialize_context(self, context: Any) -> RequestContext:
        if isinstance(context, RequestContext):
            return context
        return RequestContext.from_dict(context if isinstance(context, dict) else {})
