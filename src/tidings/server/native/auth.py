"""The native API's doors: which scope each route needs, and the audit trail it leaves.

Every route is in one of three sets: open (health, unsubscribe links, which carry their
own signature), `operate`, or the default: `read` for GET, `admin` for anything else. A
route nobody listed therefore needs the most, never the least (tests/integration/
test_security_tokens.py checks that every route of the app has a rule it meant).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import Request

from tidings.server.access import ANONYMOUS, Access, Principal, Scope

log = logging.getLogger("tidings.access")

Asgi = Callable[[MutableMapping[str, Any], Callable[..., Awaitable[Any]],
                 Callable[..., Awaitable[Any]]], Awaitable[None]]

OPEN = frozenset({
    ("GET", "/health"), ("GET", "/health/ready"),
    ("GET", "/unsubscribe/{token}"), ("POST", "/unsubscribe/{token}"),
})

_Q, _C = "/v1/queues/{name}", "/v1/campaigns/{name}"
OPERATE = frozenset({
    ("POST", f"{_Q}/messages"), ("POST", f"{_Q}/messages:batch"),
    ("GET", f"{_Q}/messages"),  # a receive changes state: not a read
    ("DELETE", f"{_Q}/messages/{{receipt_handle}}"), ("POST", f"{_Q}/messages:delete"),
    ("POST", f"{_Q}/messages:visibility"), ("POST", f"{_Q}/messages:visibility-batch"),
    ("POST", f"{_Q}/redrive"), ("POST", "/v1/move-tasks/{handle}/cancel"),
    ("POST", "/v1/schedules/{group}/{name}:enable"),
    ("POST", "/v1/schedules/{group}/{name}:disable"),
    ("POST", f"{_C}/pause"), ("POST", f"{_C}/resume"), ("POST", f"{_C}/cancel"),
    ("POST", f"{_C}/recipients/{{recipient_id}}/cancel"),
    ("POST", "/v1/email/send"), ("POST", "/v1/email/resend"),
    ("POST", "/v1/email/templates/{name}/render"),
    # an app signs people up and records their choices; the lists themselves are admin's
    ("POST", "/v1/email/contact-lists/{name}/contacts"),
    ("PUT", "/v1/email/contact-lists/{name}/contacts/{address}"),
    ("DELETE", "/v1/email/contact-lists/{name}/contacts/{address}"),
    # relays report bounces and complaints (credentials: https://any:TOKEN@host/…)
    ("POST", "/v1/email/events/ses"), ("POST", "/v1/email/events/postmark"),
})

#: Reads that need admin: the audit log says who did what.
ADMIN_READS = frozenset({("GET", "/v1/audit")})

#: Operations below admin that still go into the audit log (every admin write does).
AUDITED_OPERATIONS = frozenset({
    ("POST", f"{_Q}/redrive"), ("POST", "/v1/move-tasks/{handle}/cancel"),
    ("POST", "/v1/schedules/{group}/{name}:enable"),
    ("POST", "/v1/schedules/{group}/{name}:disable"),
    ("POST", f"{_C}/pause"), ("POST", f"{_C}/resume"), ("POST", f"{_C}/cancel"),
    ("POST", f"{_C}/recipients/{{recipient_id}}/cancel"), ("POST", "/v1/email/resend"),
})

#: Where the dependency leaves (actor, action) for the audit middleware.
AUDIT_KEY = "tidings.audit"


def needed_scope(method: str, path: str) -> Scope | None:
    """The scope a route (method, path template) needs; None for an open one."""
    key = (method.upper(), path)
    if key in OPEN:
        return None
    if key in OPERATE:
        return Scope.OPERATE
    if key in ADMIN_READS:
        return Scope.ADMIN
    return Scope.READ if key[0] in ("GET", "HEAD") else Scope.ADMIN


def audited(method: str, path: str) -> bool:
    key = (method.upper(), path)
    return key in AUDITED_OPERATIONS or (key[0] not in ("GET", "HEAD")
                                         and needed_scope(*key) is Scope.ADMIN)


def route_path(request: Request) -> str:
    route = request.scope.get("route")
    return str(getattr(route, "path", request.url.path))


async def authorise_native(request: Request) -> Principal:
    """FastAPI dependency of every native route: the caller, if its token allows."""
    path = route_path(request)
    needed = needed_scope(request.method, path)
    if needed is None:
        return ANONYMOUS
    access = request.app.state.tidings_access
    assert isinstance(access, Access)
    principal = access.authorise(request.headers.get("authorization"), needed)
    if audited(request.method, path):
        request.scope[AUDIT_KEY] = (principal.id, f"{request.method} {path}")
    return principal


class AuditTrail:
    """ASGI middleware: after a successful audited native call, write the audit entry.

    It runs after the response is sent, so the log never delays the answer; a failure
    to write it is logged loudly (the action itself already happened)."""

    def __init__(self, app: Asgi, record: Callable[[str, str, str, str], Awaitable[None]]
                 ) -> None:
        self.app = app
        self.record = record

    async def __call__(self, scope: MutableMapping[str, Any],
                       receive: Callable[..., Awaitable[Any]],
                       send: Callable[..., Awaitable[Any]]) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        status = 500

        async def watch(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        await self.app(scope, receive, watch)
        entry = scope.get(AUDIT_KEY)
        if entry is not None and status < 400:
            actor, action = entry
            try:
                await self.record(actor, "native", action, str(scope.get("path", "")))
            except Exception:
                log.exception("could not write the audit entry for %s by %s", action, actor)
