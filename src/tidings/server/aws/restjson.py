"""What the REST-JSON AWS APIs (EventBridge Scheduler, SES v2) share: reading a bounded
body, checking the signature, and answering errors the way their SDKs read them
(`x-amzn-ErrorType` header, a JSON body with the message).

A request no route of the API answers (a path under its prefix, or a known path with
another method) gets `UnknownOperationException`, as AWS answers an operation it does not
route: HTTP 404, the code in `x-amzn-ErrorType`, the service's message member. When the
method and path are those of an operation the real service has (`OperationIndex`), the
message names it and says tidings does not implement it.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.errors import TidingsError
from tidings.server.aws.auth import Authenticator
from tidings.server.aws.sigv4 import SigV4Error

log = logging.getLogger("tidings.aws")

#: Where `endpoint` leaves the access key id that signed the request (None: checks off).
AWS_KEY = "tidings.aws_key"

Doc = dict[str, Any]


class RestJsonError(Exception):
    """An error answered as is: HTTP status, the AWS error code, a message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def json_response(status: int, doc: Doc, request_id: str, code: str | None = None) -> Response:
    headers = {"x-amzn-RequestId": request_id}
    if code is not None:
        headers["x-amzn-ErrorType"] = code
    return Response(json.dumps(doc, separators=(",", ":")).encode(), status_code=status,
                    headers=headers, media_type="application/json")


async def read_body(request: Request, limit: int, too_long_code: str) -> bytes:
    """The body, refused past `limit` bytes without reading the rest into memory."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RestJsonError(413, too_long_code, f"The request is longer than {limit} bytes.")
        chunks.append(chunk)
    return b"".join(chunks)


def endpoint(op: Callable[[Request, bytes], Awaitable[Doc]], auth: Authenticator, *,
             service: str, message_key: str, limit: int, too_long_code: str,
             to_aws: Callable[[TidingsError], RestJsonError], internal_code: str,
             ) -> Callable[[Request], Awaitable[Response]]:
    """One route's handler: `op(request, body)` returns the response document; every
    failure becomes the error shape of the service (`message_key` is "Message" for
    Scheduler, "message" for SES v2, as their models name it)."""

    async def handle(request: Request) -> Response:
        request_id = str(uuid.uuid4())
        try:
            body = await read_body(request, limit, too_long_code)
            request.scope[AWS_KEY] = auth.check(request.scope, body)
            result = await op(request, body)
        except SigV4Error as exc:
            return json_response(exc.status, {message_key: exc.message}, request_id,
                                 exc.json_code)
        except RestJsonError as exc:
            return json_response(exc.status, {message_key: exc.message}, request_id, exc.code)
        except TidingsError as exc:
            err = to_aws(exc)
            return json_response(err.status, {message_key: err.message}, request_id, err.code)
        except Exception:
            log.exception("%s %s %s failed", service, request.method, request.url.path)
            return json_response(500, {message_key: "Unexpected error while processing the"
                                       " request."}, request_id, internal_code)
        return json_response(200, result, request_id)

    return handle


UNKNOWN_OPERATION = "UnknownOperationException"
#: Every method a catch-all route takes: a known path asked with another method is an
#: unknown operation too (REST APIs route on method and path together).
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
_LABEL = re.compile(r"\{[A-Za-z0-9_]+(\+?)\}")


@dataclass(frozen=True)
class OperationIndex:
    """A REST API's operations by method and path template, as the service model routes
    them (`GET /v2/email/templates/{TemplateName}`), to name the operation of a request."""

    routes: tuple[tuple[str, re.Pattern[str], str], ...]

    @classmethod
    def of(cls, rows: Iterable[tuple[str, str, str]]) -> OperationIndex:
        """From (method, path template, operation name) rows. A template with fewer labels
        is tried first, so `/identities/list` wins over `/identities/{Name}`."""
        compiled = []
        for method, template, name in rows:
            parts = []
            for part in re.split(r"(\{[^}]+\})", template):
                label = _LABEL.fullmatch(part)
                if label is None:
                    parts.append(re.escape(part))
                else:  # {Key+} is greedy: it may span segments
                    parts.append(".+" if label.group(1) else "[^/]+")
            compiled.append((template.count("{"), method, re.compile("".join(parts)), name))
        compiled.sort(key=lambda row: row[0])
        return cls(tuple((method, pattern, name) for _, method, pattern, name in compiled))

    @classmethod
    def parse(cls, text: str) -> OperationIndex:
        """From `METHOD PATH OPERATION` lines; `#` starts a comment line."""
        rows = [line.split() for line in text.splitlines()
                if line.strip() and not line.startswith("#")]
        return cls.of((method, path, name) for method, path, name in rows)

    def name_of(self, method: str, path: str) -> str | None:
        for wanted, pattern, name in self.routes:
            if wanted == method and pattern.fullmatch(path):
                return name
        return None


def unknown_operation(service: str, known: OperationIndex | None = None,
                      ) -> Callable[[Request, bytes], Awaitable[Doc]]:
    """An `endpoint` operation answering `UnknownOperationException` for whatever reached
    it. `service` names the API in the message ("Amazon SES v2")."""

    async def refuse(request: Request, _body: bytes) -> Doc:
        method, path = request.method, request.url.path
        name = known.name_of(method, path) if known is not None else None
        if name is not None:
            message = (f"{name} is an {service} operation that tidings does not implement "
                       f"({method} {path}).")
        else:
            message = f"No {service} operation answers {method} {path}."
        raise RestJsonError(404, UNKNOWN_OPERATION, message)

    return refuse


def catch_all_routes(prefixes: Iterable[str],
                     handler: Callable[[Request], Awaitable[Response]]) -> list[Route]:
    """Routes taking every method on each prefix and every path below it; mounted after
    the API's own routes, which therefore win whenever they match."""
    routes = []
    for prefix in prefixes:
        routes.append(Route(prefix, handler, methods=ALL_METHODS))
        routes.append(Route(prefix + "/{rest:path}", handler, methods=ALL_METHODS))
    return routes
