"""How every console page is answered: the template environment, the security headers, the
session and its CSRF check, and the one wrapper that turns a POST into an action.

Templates are Jinja2 with autoescape on for every file: a queue name, a message body or a
template's output is text wherever it appears, unless a view hands over `Markup` it built
itself (the SVG charts, whose every piece of user data is escaped on the way in). Jinja2 is
the best-kept Python template library and Starlette's own choice; `StrictUndefined` makes a
misspelt variable an error in the tests instead of an empty cell in production.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode

from jinja2 import Environment, FunctionLoader, StrictUndefined
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from tidings.errors import TidingsError
from tidings.server.console.session import COOKIE, SESSION_S, Session, Sessions, allows
from tidings.server.native.deps import Context

log = logging.getLogger("tidings.console")

#: No script but ours, no style but ours, no frames but the sandboxed preview (same
#: origin, itself under a CSP that forbids everything), nothing loaded from elsewhere.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-src 'self'; frame-ancestors 'none'; "
       "base-uri 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
FLASH = "tidings_flash"


def _load(name: str) -> str:
    return resources.files("tidings.server.console").joinpath("templates", name).read_text()


def when(ms: int | None, zone: Any = UTC) -> str:
    """An instant for people: UTC (or the zone given), to the second."""
    if ms is None:
        return "—"
    return datetime.fromtimestamp(ms / 1000, zone).strftime("%Y-%m-%d %H:%M:%S %Z")


def ago(ms: int | None, now: int) -> str:
    if ms is None:
        return "—"
    s = max((now - ms) // 1000, 0)
    if s < 3600:
        return f"{s} s ago" if s < 60 else f"{s // 60} min ago"
    return f"{_hours(s)} ago" if s < 86400 else f"{s // 86400} d ago"


def duration(ms: int | None) -> str:
    if ms is None:
        return "—"
    s = ms // 1000
    if s < 60:
        return f"{s} s"
    return f"{s // 60} min {s % 60} s" if s < 3600 else _hours(s)


def _hours(s: int) -> str:
    return f"{s // 3600} h {s % 3600 // 60} min"


def seconds(s: float | None) -> str:
    """A latency bound for people: ms below a second, else seconds."""
    if s is None:
        return "—"
    return f"{s * 1000:g} ms" if s < 1 else f"{s:g} s"


def number(n: int | float | None) -> str:
    return "—" if n is None else f"{n:,}"


def page_url(path: str, params: dict[str, Any]) -> str:
    """A bookmarkable address: the path (each segment quoted) and the filters given."""
    kept = {k: v for k, v in params.items() if v not in (None, "")}
    return path + (("?" + urlencode(kept)) if kept else "")


ENV = Environment(loader=FunctionLoader(_load), autoescape=True, undefined=StrictUndefined,
                  trim_blocks=True, lstrip_blocks=True)
ENV.filters.update(when=when, duration=duration, number=number, seconds=seconds,
                   path=lambda s: quote(str(s), safe=""))
ENV.globals.update(ago=ago, page_url=page_url, zip=zip)


class Console:
    """What the console's views share: the node's context and its sessions."""

    def __init__(self, ctx: Context, sessions: Sessions) -> None:
        self.ctx = ctx
        self.sessions = sessions

    def session(self, request: Request) -> Session | None:
        return self.sessions.read(request.cookies.get(COOKIE))

    def render(self, request: Request, session: Session, template: str, status: int = 200,
               **values: Any) -> Response:
        flash = unquote(request.cookies.get(FLASH) or "") or None
        html = ENV.get_template(template).render(
            request=request, session=session, csrf=self.sessions.csrf_token(session),
            theme=request.cookies.get("tidings_theme", "auto"), flash=flash,
            signin_required=self.sessions.required, path=request.url.path,
            can={scope: allows(session.scope, scope) for scope in ("operate", "admin")},
            **values)
        response = HTMLResponse(html, status_code=status, headers=HEADERS)
        if flash:
            response.delete_cookie(FLASH, path="/ui")
        return response

    def remember(self, request: Request, response: Response, cookie: str) -> None:
        response.set_cookie(COOKIE, cookie, max_age=SESSION_S, path="/ui", httponly=True,
                            samesite="strict", secure=request.url.scheme == "https")


MAX_FORM_BYTES = 2 * 1024 * 1024  # a test message of SQS's largest size, urlencoded


async def read_form(request: Request) -> dict[str, list[str]]:
    """The fields of a urlencoded form (what every console form posts), bounded in size.
    Parsed here rather than with a multipart library: no file is ever uploaded."""
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    if kind != "application/x-www-form-urlencoded":
        raise ValueError("a console action is a urlencoded form post")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise ValueError("form too large")
    return parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)


Handler = Callable[[Request, Session], Awaitable[Response]]
Action = Callable[[Request, Session, dict[str, Any]], Awaitable[str]]


def page(console: Console, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A GET view: signs the viewer in (anonymously on an open node) and checks `read`."""

    async def endpoint(request: Request) -> Response:
        session = console.session(request)
        fresh = None
        if session is None:
            if console.sessions.required:
                return RedirectResponse(page_url("/ui/signin", {"next": request.url.path}),
                                        status_code=303, headers=HEADERS)
            session, fresh = console.sessions.issue("admin", signed_in=False)
        if not allows(session.scope, "read"):
            return HTMLResponse("Forbidden: this token cannot read", 403, headers=HEADERS)
        try:
            response = await handler(request, session)
        except TidingsError as exc:
            response = console.render(request, session, "error.html", status=_status(exc),
                                      error=str(exc))
        if fresh:
            console.remember(request, response, fresh)
        return response

    return endpoint


def _status(exc: TidingsError) -> int:
    from tidings.server.errors import ERROR_TABLE

    for cls in type(exc).__mro__:
        if cls in ERROR_TABLE:
            return ERROR_TABLE[cls].status
    return 500


def action(console: Console, needed: str, act: Action,
           ) -> Callable[[Request], Awaitable[Response]]:
    """A POST: session, CSRF token and scope checked, then `act` runs and the viewer is
    sent back (to the form's `back`, a path under /ui) with what happened as a flash."""

    async def endpoint(request: Request) -> Response:
        session = console.session(request)
        try:
            fields = await read_form(request)
        except ValueError as exc:
            return HTMLResponse(str(exc), 400, headers=HEADERS)
        values: dict[str, Any] = {k: v[-1] for k, v in fields.items()}
        values["selected"] = fields.get("selected", [])
        if session is None:
            return HTMLResponse("Sign in first", 401, headers=HEADERS)
        if not console.sessions.csrf_ok(session, values.get("csrf")):
            return console.render(request, session, "error.html", status=403,
                                  error="Forbidden: missing or wrong CSRF token (reload the "
                                  "page and try again)")
        if not allows(session.scope, needed):
            return console.render(request, session, "error.html", status=403,
                                  error=f"Forbidden: this action needs the {needed} scope; "
                                  f"you are signed in with a {session.scope} token")
        back = values.get("back") or "/ui/"
        if not back.startswith("/ui") or back.startswith("//"):
            back = "/ui/"
        try:
            message = await act(request, session, values)
        except TidingsError as exc:
            message = f"Failed: {exc}"
        else:
            action_name = request.url.path.rsplit("/", 1)[-1]
            await console.ctx.bridge.run(console.ctx.t.audit.record, session.who, "console",
                                         action_name, request.url.path)
        log.info("console action %s by %s: %s", request.url.path, session.who, message)
        response = RedirectResponse(back, status_code=303, headers=HEADERS)
        response.set_cookie(FLASH, quote(message)[:1500], max_age=60, path="/ui",
                            httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")
        return response

    return endpoint
