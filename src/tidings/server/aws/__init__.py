"""The AWS wire APIs: where SQS requests enter, are authenticated and dispatched.

SQS requests arrive as `POST /` with `X-Amz-Target: AmazonSQS.<Action>` (JSON protocol), as
a form post carrying `Action=<Action>` (query protocol), or as a form post to the queue URL
itself (`POST /{account_id}/{queue_name}`, how older SDKs address a queue). The entry point
is a bare ASGI app. JSON requests reach it ahead of the FastAPI application
(server/app.py's `TidingsApp`), behind only the limits: the hot path (SendMessage) costs
one body read, one `json.loads`, one dict lookup and one hop to the store's thread.
"""

from __future__ import annotations

import itertools
import logging
import secrets
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tidings.client import Tidings
from tidings.errors import TidingsError
from tidings.queues.coalesce import Coalescer
from tidings.runtime.bridge import Bridge
from tidings.server.aws.arns import Naming
from tidings.server.aws.auth import AccessDenied, Authenticator
from tidings.server.aws.grants import SQS_AUDITED, SQS_UNNAMED, filter_sqs_listing, sqs_names
from tidings.server.aws.sigv4 import SigV4Error
from tidings.server.aws.sqs import ACTIONS, Call
from tidings.server.aws.sqs_protocol import (
    JSON_CONTENT_TYPE,
    XML_CONTENT_TYPE,
    SqsError,
    UnknownOperation,
    error_headers,
    from_tidings,
    json_body,
    json_error,
    parse_json,
    parse_query,
    xml_body,
    xml_error,
)
from tidings.server.limits import SQS_MAX_BODY

log = logging.getLogger("tidings.sqs")

#: SQS takes at most 1 MiB of messages a request; JSON escaping or the query protocol's
#: percent-encoding can triple that. The limits middleware refuses more (413) first;
#: this is the endpoint's own guard when it is mounted without it.
MAX_REQUEST_BYTES = SQS_MAX_BODY
_JSON_TARGET_PREFIX = "AmazonSQS."


class _RequestIds:
    """UUID-shaped request ids: a random per-process prefix and a counter. Unique is all a
    request id must be, and reading the OS's random source per request costs more."""

    def __init__(self) -> None:
        prefix = secrets.token_hex(10)
        self._prefix = f"{prefix[:8]}-{prefix[8:12]}-{prefix[12:16]}-{prefix[16:20]}-"
        self._counter = itertools.count(1)

    def next(self) -> str:
        return f"{self._prefix}{next(self._counter):012x}"


class SqsEndpoint:
    """ASGI app answering both SQS protocols for one `Tidings`."""

    def __init__(self, t: Tidings, bridge: Bridge, coalescer: Coalescer) -> None:
        s = t.settings
        self.t = t
        self.bridge = bridge
        self.coalescer = coalescer
        self.naming = Naming(s.region, s.account_id, s.public_url)
        self.auth = Authenticator.from_settings(s, t.clock, "sqs")
        self.request_ids = _RequestIds()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request_id = self.request_ids.next()
        target = None
        for key, value in scope["headers"]:
            if key == b"x-amz-target":
                target = value.decode("latin-1")
                break
        action = "Unknown"
        is_json = target is not None
        try:
            body = await _read_body(receive)
            if is_json:
                action = str(target).removeprefix(_JSON_TARGET_PREFIX)
                akid = self.auth.check(scope, body)
                req = parse_json(body)
            else:
                akid = self.auth.check(scope, body)
                req = self._form(scope, body)
                action = str(req.pop("Action", "") or "")
            handler = ACTIONS.get(action)
            if handler is None:
                raise UnknownOperation(_unknown_action(action, target))
            grant = self.auth.grant(akid)
            audited = action in SQS_AUDITED
            names = sqs_names(req) if grant.prefixes is not None or audited else []
            if grant.prefixes is not None:
                if action in SQS_UNNAMED:
                    raise AccessDenied(f"User: {akid} is not authorized to perform: "
                                       f"sqs:{action}: the key is limited to name prefixes")
                self.auth.check_names(akid, action, names)
            result = await handler(Call(self.t, self.bridge, self.coalescer, self.naming,
                                        scope), req)
            if grant.prefixes is not None:
                result = filter_sqs_listing(result, grant.allows_name)
            if audited:
                await self.bridge.run(self.t.audit.record, akid or "anonymous", "sqs",
                                      f"sqs:{action}", ",".join(names) or "-")
        except SigV4Error as exc:
            err = SqsError(exc.json_code if is_json else exc.code, exc.message,
                           query_code=exc.code, status=exc.status)
            return await self._error(send, err, is_json, request_id)
        except SqsError as exc:
            return await self._error(send, exc, is_json, request_id)
        except TidingsError as exc:
            return await self._error(send, from_tidings(exc, action), is_json, request_id)
        except Exception:
            log.exception("SQS %s failed", action)
            err = SqsError("InternalFailure", "The request processing has failed because of an "
                           "unknown error, exception or failure.")
            return await self._error(send, err, is_json, request_id)
        if is_json:
            await _respond(send, 200, JSON_CONTENT_TYPE, json_body(result), request_id)
        else:
            await _respond(send, 200, XML_CONTENT_TYPE, xml_body(action, result, request_id),
                           request_id)

    def _form(self, scope: Scope, body: bytes) -> dict[str, Any]:
        pairs = parse_qsl(bytes(scope.get("query_string", b"")).decode("latin-1"),
                          keep_blank_values=True)
        try:
            pairs += parse_qsl(body.decode(), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            raise SqsError("InvalidParameterValue", "The form body is not UTF-8.") from None
        req = parse_query(pairs)
        queue = scope.get("path_params", {}).get("queue_name")
        if queue and not req.get("QueueUrl"):
            req["QueueUrl"] = queue  # the queue URL was the request's own path
        return req

    async def _error(self, send: Send, err: SqsError, is_json: bool, request_id: str) -> None:
        if is_json:
            status, headers, payload = json_error(err)
            await _respond(send, status, JSON_CONTENT_TYPE, payload, request_id, headers)
        else:
            status, payload = xml_error(err, request_id)
            await _respond(send, status, XML_CONTENT_TYPE, payload, request_id,
                           error_headers(err))


def _unknown_action(action: str, target: str | None) -> str:
    if target is None:  # the query protocol: SQS's own words
        return f"The action {action or '(none)'} is not valid for this endpoint."
    if not target.startswith(_JSON_TARGET_PREFIX):
        return f"tidings does not serve the operation {target!r} (X-Amz-Target)."
    # tidings serves every operation of the SQS API version it knows (2012-11-05)
    return f"{action or '(none)'} is not an operation of Amazon SQS (X-Amz-Target: {target})."


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            raise SqsError("InvalidParameterValue",
                           f"The request is longer than {MAX_REQUEST_BYTES} bytes.")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _respond(send: Send, status: int, content_type: bytes, payload: bytes,
                   request_id: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(payload)).encode()),
               (b"x-amzn-requestid", request_id.encode())]
    if extra:
        headers += extra
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def is_sqs_json(scope: Scope) -> bool:
    """A JSON-protocol SQS request: `POST /` with `X-Amz-Target: AmazonSQS.*`."""
    if scope["type"] == "http" and scope["path"] == "/" and scope["method"] == "POST":
        for key, value in scope["headers"]:
            if key == b"x-amz-target":
                return bool(value.startswith(b"AmazonSQS."))
    return False


def mount_sqs(app: FastAPI, t: Tidings, bridge: Bridge, coalescer: Coalescer) -> SqsEndpoint:
    """Serve the SQS query protocol on `app`: form posts to `/` and to a queue URL
    (`POST /{account}/{queue}`) by routes. Call it after every other route is added: their
    two-segment paths (`POST /v1/queues`) must win over the latter. The JSON protocol is
    the returned endpoint's to answer ahead of the application (`is_sqs_json`)."""
    endpoint = SqsEndpoint(t, bridge, coalescer)
    app.router.routes.append(Route("/", endpoint, methods=["POST"]))
    app.router.routes.append(Route("/{account_id}/{queue_name}", endpoint, methods=["POST"]))
    return endpoint
