"""405 Method Not Allowed with the path's real `Allow`, for every path of the OpenAPI document.

Starlette answers 405 only when no later route takes the request, and its `Allow` names the
methods of the first route whose path matched: FastAPI makes one route per method, so
`DELETE /v1/queues` said `Allow: POST` though the path also takes GET, and a method no native
route declares on a two-segment path (`POST /v1/audit`) fell through to the SQS query
protocol's `POST /{account}/{queue}` and got an SQS XML error. This gate stands first in the
router: a request whose path is one of the document's paths but whose method that path does
not declare is answered 405 here, with `Allow` listing every method the path declares.

The methods come from the OpenAPI document, which FastAPI builds from the routes, so a new
endpoint joins by being a route; nothing is listed twice. Where two templates match one path
(`/v1/schedules/{group}/{name}` and `/v1/schedules/{group}/{name}:apply` both match
`/v1/schedules/g/n:apply`), the one with more literal text is the path the request names, as
in the document.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from starlette.datastructures import URLPath
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match, NoMatchFound
from starlette.types import Receive, Scope, Send

_PARAM = re.compile(r"{[^}]*}")
_METHODS = {"GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE"}


class _Path:
    __slots__ = ("literal", "methods", "regex")

    def __init__(self, template: str, methods: set[str]) -> None:
        # A path parameter is one segment, as Starlette's default `str` convertor matches.
        pieces = _PARAM.split(template)
        self.regex = re.compile("^" + "[^/]+".join(map(re.escape, pieces)) + "$")
        self.literal = sum(map(len, pieces))
        self.methods = methods


class MethodGate(BaseRoute):
    """A route that matches only requests with a method their path does not declare.

    `document` is the app's OpenAPI generator (`app.openapi`): read at the first request,
    once every route is in place."""

    def __init__(self, document: Callable[[], dict[str, Any]]) -> None:
        self._document = document
        self._table: list[_Path] | None = None

    def _paths(self) -> list[_Path]:
        if self._table is None:
            self._table = [
                _Path(template, {m.upper() for m in item if m.upper() in _METHODS})
                for template, item in self._document().get("paths", {}).items()]
        return self._table

    def allowed(self, path: str) -> set[str] | None:
        """The methods the document declares on `path`, or None if it is not one of its paths."""
        best: set[str] | None = None
        best_literal = -1
        for entry in self._paths():
            if entry.literal < best_literal or not entry.regex.match(path):
                continue
            if entry.literal > best_literal:
                best, best_literal = set(), entry.literal
            assert best is not None
            best |= entry.methods
        return best

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http":
            return Match.NONE, {}
        path: str = scope["path"]
        root: str = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        allowed = self.allowed(path)
        if allowed is None or scope["method"] in allowed:
            return Match.NONE, {}
        return Match.FULL, {"tidings_allow": ", ".join(sorted(allowed)), "tidings_path": path}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Raised, not answered here: the native error handler gives it the one error body.
        allow = scope["tidings_allow"]
        raise HTTPException(405, f"{scope['method']} is not a method of {scope['tidings_path']}"
                            f" (it takes {allow})", headers={"Allow": allow})

    def url_path_for(self, name: str, /, **path_params: Any) -> URLPath:
        raise NoMatchFound(name, path_params)  # it names no endpoint of its own
