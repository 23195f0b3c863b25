"""What the REST-JSON AWS APIs (EventBridge Scheduler, SES v2) share: reading a bounded
body, checking the signature, and answering errors the way their SDKs read them
(`x-amzn-ErrorType` header, a JSON body with the message)."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

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
