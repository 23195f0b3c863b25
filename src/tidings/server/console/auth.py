"""Signing in to the console with an API token, and out again.

The token is checked once, here; the browser then holds only the signed session cookie,
never the token. A sign-in form posted from another site is refused by its Origin.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from tidings.server.console.session import COOKIE, Session
from tidings.server.console.web import ENV, HEADERS, Console, action, read_form


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    return origin.split("://", 1)[-1] == host


def _next(value: str | None) -> str:
    if value and value.startswith("/ui") and not value.startswith("//"):
        return value
    return "/ui/"


def routes(console: Console) -> list[Route]:
    def form(request: Request, error: str = "", status: int = 200) -> Response:
        html = ENV.get_template("signin.html").render(
            next=_next(request.query_params.get("next")), error=error,
            required=console.sessions.required, theme=request.cookies.get("tidings_theme",
                                                                         "auto"))
        return HTMLResponse(html, status, headers=HEADERS)

    async def signin_page(request: Request) -> Response:
        return form(request)

    async def signin(request: Request) -> Response:
        if not _same_origin(request):
            return HTMLResponse("Forbidden: sign-in from another site", 403, headers=HEADERS)
        try:
            data = {k: v[-1] for k, v in (await read_form(request)).items()}
        except ValueError as exc:
            return HTMLResponse(str(exc), 400, headers=HEADERS)
        token = data.get("token") or ""
        found = console.sessions.sign_in(token) if token else None
        if found is None:
            return form(request, "That token is not valid here.", 401)
        scope, who = found
        _, cookie = console.sessions.issue(scope, signed_in=console.sessions.required, who=who)
        response = RedirectResponse(_next(data.get("next")), 303, headers=HEADERS)
        console.remember(request, response, cookie)
        return response

    async def signout(request: Request, session: Session, values: dict[str, Any]) -> str:
        return "Signed out."

    signout_action = action(console, "read", signout)

    async def signout_endpoint(request: Request) -> Response:
        response = await signout_action(request)
        if response.status_code == 303:
            response.headers["location"] = "/ui/signin"
            response.delete_cookie(COOKIE, path="/ui")
        return response

    return [
        Route("/signin", signin_page, methods=["GET"]),
        Route("/signin", signin, methods=["POST"]),
        Route("/signout", signout_endpoint, methods=["POST"]),
    ]
