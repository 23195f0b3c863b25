"""The ASGI application: health, the native API under /v1 and its OpenAPI document.

`tidings serve` (tidings/node.py) builds it with the node's bridge, group commit and
lifespan, so the engine loops start and stop with the server; tests build it bare.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any
from urllib.parse import urlparse

from fastapi import Depends, FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.types import ASGIApp, Receive, Scope, Send

from tidings.client import Tidings
from tidings.errors import StoreUnavailable
from tidings.queues.coalesce import Coalescer
from tidings.runtime.bridge import Bridge
from tidings.runtime.health import Health
from tidings.runtime.metrics import EMAIL_WAITING, REGISTRY
from tidings.server.access import Access
from tidings.server.aws import is_sqs_json, mount_sqs
from tidings.server.aws.scheduler import scheduler_routes
from tidings.server.aws.ses import ses_routes
from tidings.server.console import console_routes
from tidings.server.errors import install_native_handlers
from tidings.server.limits import Limits
from tidings.server.native import (
    audit,
    campaigns,
    contacts,
    email,
    messages,
    openapi,
    push,
    queues,
    schedules,
)
from tidings.server.native import limits as limit_api
from tidings.server.native.auth import AuditTrail, authorise_native
from tidings.server.native.deps import Context
from tidings.server.native.methods import MethodGate
from tidings.server.native.models import HealthOut, ReadinessOut
from tidings.server.readiness import may_see_details, readiness
from tidings.version import VERSION

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[Any]]


class TidingsApp(FastAPI):
    """The FastAPI application with a front door for the SQS JSON protocol: those requests
    go to `sqs_front` (the SQS endpoint behind the same limits as everything else) before
    FastAPI's own layers (its telemetry check, error, exception and body-limit middleware,
    the middleware stack), none of which an SQS request uses: they were a tenth of the
    server's CPU per SendMessage. Every other request takes FastAPI's path."""

    sqs_front: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.sqs_front is not None and is_sqs_json(scope):
            return await self.sqs_front(scope, receive, send)
        await super().__call__(scope, receive, send)


def backend_name(url: str) -> str:
    scheme = urlparse(url).scheme
    return "postgresql" if scheme in ("postgres", "postgresql") else scheme


def create_app(t: Tidings, *, bridge: Bridge | None = None, coalescer: Coalescer | None = None,
               lifespan: Lifespan | None = None, access: Access | None = None,
               node_health: Health | None = None) -> FastAPI:
    """The HTTP application over `t`.

    Without a `bridge`, the app makes one sized by the store's `max_concurrency` and closes
    it at shutdown; a given bridge belongs to the caller. Without a `coalescer` (the group
    commit of sends and deletes) the app makes one over its bridge. `lifespan` runs inside
    the app's own (the node passes its own, which starts the engine loops). `access`
    (default: from the settings) says which bearer tokens the native API takes. `node_health`
    is the node's (what its loops cannot do now), for `GET /health/ready`.
    """
    owned = bridge is None
    the_bridge = bridge if bridge is not None else Bridge.for_store(t.store)
    group_commit = coalescer if coalescer is not None else Coalescer(
        t.queues, the_bridge, max_long_polls=t.settings.max_long_polls)

    @contextlib.asynccontextmanager
    async def app_lifespan(app: FastAPI) -> AsyncIterator[Any]:
        try:
            if lifespan is None:
                yield None
            else:
                async with lifespan(app) as state:
                    yield state
        finally:
            if owned:
                the_bridge.close()

    app = TidingsApp(
        title="tidings",
        version=VERSION,
        summary="Self-hosted queues: the native JSON API.",
        description="Queues with Amazon SQS semantics. Errors have the body "
        '`{"error": {"code", "message", "field"}}`; bad input is a 400 naming the field '
        "and the rule it broke.",
        lifespan=app_lifespan,
        # Every native route: the token and scope check (server/native/auth.py).
        dependencies=[Depends(authorise_native)],
    )
    app.state.tidings_context = Context(t, the_bridge, group_commit)
    app.state.tidings_access = access if access is not None else Access.from_settings(
        t.settings)
    limits = Limits.from_settings(t.settings)
    app.state.tidings_limits = limits
    install_native_handlers(app)
    openapi.install(app)  # errors documented as answered: 400 not 422, one error body

    db = backend_name(t.database_url)

    @app.get("/health", response_model=HealthOut, tags=["health"])
    async def health() -> dict[str, str]:
        """Liveness: the process answers. `db` names the database backend in use,
        `version` the tidings release this node runs."""
        return {"status": "ok", "db": db, "version": VERSION}

    @app.get("/health/ready", response_model=ReadinessOut, tags=["health"],
             responses={503: {"model": ReadinessOut,
                              "description": "Something this node needs is failing now."}})
    async def health_ready(request: Request, response: Response) -> ReadinessOut:
        """Readiness: the database answers and, on a node, its loops work (the dispatcher
        fires, no loop is backing off). 503 names what is failing; why and since when are
        shown to a caller with a read token, or to anyone where the node needs none."""
        details = may_see_details(app.state.tidings_access,
                                  request.headers.get("authorization"))
        status, body = await readiness(t, the_bridge, db, node_health, details=details)
        response.status_code = status
        return body

    app.include_router(queues.router)
    app.include_router(messages.router)
    app.include_router(schedules.router)
    app.include_router(email.router)
    app.include_router(email.unsubscribe_router)
    app.include_router(contacts.router)
    app.include_router(campaigns.router)
    app.include_router(audit.router)
    app.include_router(limit_api.router)
    app.include_router(push.router)

    @app.get("/metrics", tags=["health"], response_class=Response,
             responses={200: {"content": {CONTENT_TYPE_LATEST: {}},
                              "description": "Prometheus text exposition format."}})
    async def metrics() -> Response:
        """This process's Prometheus metrics: firings, deliveries, lateness, jobs."""
        # Read at the scrape, not by a loop of the node: exact when looked at, and no
        # statement every few seconds that nobody reads (an idle node's CPU). A database
        # that does not answer leaves the last value; the readiness probe says why.
        with contextlib.suppress(StoreUnavailable):
            EMAIL_WAITING.set(await the_bridge.run(t.email.waiting))
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    # The console at /ui, before the AWS routes below (whose `POST /{account}/{queue}`
    # would take `/ui/queues/...`).
    app.router.routes.extend(console_routes(app.state.tidings_context,
                                            app.state.tidings_access.token_check()))

    # Last: `POST /{account}/{queue}` (SQS query protocol) would otherwise catch `/v1/queues`
    # and the Scheduler and SES v2 APIs' paths, which therefore come just before it.
    app.router.routes.extend(scheduler_routes(t, the_bridge))
    app.router.routes.extend(ses_routes(t, the_bridge))

    # First of all routes: a method the document does not declare on one of its paths is a
    # 405 with the path's real `Allow`, before the SQS query protocol's catch-all sees it.
    app.router.routes.insert(0, MethodGate(app.openapi))

    async def record(actor: str, face: str, action: str, resource: str) -> None:
        await the_bridge.run(t.audit.record, actor, face, action, resource)

    # Outermost last: the limits see a request before anything reads it. The SQS JSON
    # requests enter at the front door, behind the limits too but outside the native API's
    # audit trail (SQS audits its own actions).
    app.add_middleware(AuditTrail, record=record)
    sqs = mount_sqs(app, t, the_bridge, group_commit)
    app.add_middleware(limits.middleware)
    app.sqs_front = limits.middleware(sqs)
    return app
