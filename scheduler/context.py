"""The caller's request context, as nova-conductor sends it.

Nova serializes ``RequestContext.to_dict()`` into ``_context_*`` keys; we keep
what the scheduler uses and carry the rest back untouched for casts. The
user's token is a secret: it never appears in ``repr`` or logs, and the
scheduler never uses it (Placement is called with the service's own
credentials).
"""
from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_CONTEXT_STRING = 1024


@dataclass
class RequestContext:
    request_id: str = field(default_factory=lambda: f'req-{uuid.uuid4()}')
    global_request_id: str | None = None
    user_id: str | None = None
    project_id: str | None = None
    user_name: str | None = None
    project_name: str | None = None
    roles: list[str] = field(default_factory=list)
    is_admin: bool = False
    auth_token: str | None = field(default=None, repr=False)
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def global_id(self) -> str:
        """What Nova forwards to Placement as X-OpenStack-Request-ID."""
        return self.global_request_id or self.request_id

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> RequestContext:
        def text(key: str) -> str | None:
            value = values.get(key)
            if value is None:
                return None
            # A context is metadata: anything odd is dropped, not trusted.
            if not isinstance(value, str) or len(value) > MAX_CONTEXT_STRING:
                return None
            return value

        roles = values.get('roles') or []
        if not isinstance(roles, list):
            roles = []
        known = {'request_id', 'global_request_id', 'user_id', 'user', 'project_id', 'project',
                 'user_name', 'project_name', 'roles', 'is_admin', 'auth_token'}
        return cls(
            request_id=text('request_id') or f'req-{uuid.uuid4()}',
            global_request_id=text('global_request_id'),
            user_id=text('user_id') or text('user'),
            project_id=text('project_id') or text('project'),
            user_name=text('user_name'),
            project_name=text('project_name'),
            roles=[r for r in roles[:64] if isinstance(r, str) and len(r) < 256],
            is_admin=values.get('is_admin') is True,
            auth_token=text('auth_token'),
            extra={k: v for k, v in values.items() if k not in known},
        )

    def to_dict(self) -> dict[str, Any]:
        values = dict(self.extra)
        values.update({
            'request_id': self.request_id, 'global_request_id': self.global_request_id,
            'user_id': self.user_id, 'user': self.user_id,
            'project_id': self.project_id, 'project': self.project_id,
            'user_name': self.user_name, 'project_name': self.project_name,
            'roles': list(self.roles), 'is_admin': self.is_admin, 'auth_token': self.auth_token,
        })
        return values

    def redacted_copy(self) -> RequestContext:
        """A copy without the token, and without a service catalog or auth
        details the caller may have carried; oslo.messaging's notifier sends
        this one (and drops the context altogether without this method)."""
        secret = {'auth_token', 'service_catalog', 'user_auth_plugin', 'auth_token_info'}
        return dataclasses.replace(self, auth_token=None, roles=list(self.roles),
                                   extra={k: v for k, v in self.extra.items()
                                          if k not in secret})

    def get_logging_values(self) -> dict[str, Any]:
        """What oslo.log's ContextFormatter asks a context for; without this it
        would fall back to to_dict(), token included."""
        return self.to_log_dict()

    def to_log_dict(self) -> dict[str, Any]:
        """What oslo.log may print: the ids, never the token."""
        return {'request_id': self.request_id, 'global_request_id': self.global_request_id,
                'user': self.user_id, 'project': self.project_id,
                'user_name': self.user_name, 'project_name': self.project_name}
