"""The console: every part of a node seen and operated from a browser, at `/ui`.

Server-rendered HTML (Jinja2, autoescaped), one stylesheet and one small script of our own,
SVG charts drawn on the server; no build step and nothing fetched from elsewhere, so it
works offline. Every view calls the same engine services as the APIs, through the bridge.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from tidings.server.console import (
    auth,
    campaigns,
    contacts,
    email,
    limits,
    overview,
    push,
    queues,
    schedules,
)
from tidings.server.console.session import Sessions, TokenCheck
from tidings.server.console.web import HEADERS, Console
from tidings.server.native.deps import Context

STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                ".svg": "image/svg+xml"}


def _static(request: Request) -> Response:
    name = request.path_params["name"]
    suffix = name[name.rfind("."):] if "." in name else ""
    folder = resources.files("tidings.server.console").joinpath("static")
    if "/" in name or suffix not in STATIC_TYPES or not folder.joinpath(name).is_file():
        return Response("not found", 404, headers=HEADERS)
    return Response(folder.joinpath(name).read_bytes(), media_type=STATIC_TYPES[suffix],
                    headers={**HEADERS, "Cache-Control": "public, max-age=300"})


def console_routes(ctx: Context, check: TokenCheck | None = None) -> list[BaseRoute]:
    """The console's routes under `/ui` (and `/ui` → `/ui/`). `check` maps an API token
    to its scope; None: the node has no tokens and the console is open."""
    console = Console(ctx, Sessions(ctx.t.overview.secret("console-session-key"), check))
    inner: list[BaseRoute] = [Route("/static/{name}", _static, methods=["GET"])]
    for part in (overview, queues, push, schedules, campaigns, email, contacts, limits, auth):
        inner += part.routes(console)
    return [
        Route("/ui", lambda request: RedirectResponse("/ui/", 308), methods=["GET"]),
        Mount("/ui", routes=inner),
    ]
