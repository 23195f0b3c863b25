"""The one table from tidings errors to HTTP statuses and error codes.

Services raise classes from `tidings.errors`; every HTTP interface answers through this
table, so a given failure has the same status on the native API and on the AWS wire APIs.
Codes in the AWS column are the ones the SQS API reference lists for the operations
(QueueDoesNotExist, ReceiptHandleIsInvalid, PurgeQueueInProgress, …); SDKs branch on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from tidings.email.template_engine import RenderingError
from tidings.errors import (
    BatchError,
    ConflictError,
    Forbidden,
    GroupNotFound,
    MessageNotInflight,
    NotFoundError,
    PayloadTooLarge,
    PurgeInProgress,
    QueueNotFound,
    ReceiptHandleInvalid,
    ScheduleNotFound,
    SchemaTooNew,
    StoreUnavailable,
    TidingsError,
    TooManyLongPolls,
    Unauthorized,
    ValidationError,
)


@dataclass(frozen=True)
class ErrorRow:
    status: int
    aws_code: str
    native_code: str
    #: A throttling refusal: the answer carries `Retry-After` (seconds), and its status and
    #: code are ones the AWS SDKs' retry strategies retry by themselves.
    retry_after_s: int | None = None


#: Looked up along the exception's MRO, so the most specific class wins and a new subclass
#: inherits its parent's row until it needs its own.
ERROR_TABLE: dict[type[object], ErrorRow] = {
    ValidationError: ErrorRow(400, "InvalidParameterValue", "InvalidParameterValue"),
    QueueNotFound: ErrorRow(404, "QueueDoesNotExist", "QueueNotFound"),
    ScheduleNotFound: ErrorRow(404, "ResourceNotFoundException", "ScheduleNotFound"),
    GroupNotFound: ErrorRow(404, "ResourceNotFoundException", "GroupNotFound"),
    NotFoundError: ErrorRow(404, "ResourceNotFoundException", "NotFound"),
    ConflictError: ErrorRow(409, "QueueNameExists", "ConflictException"),
    ReceiptHandleInvalid: ErrorRow(400, "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid"),
    MessageNotInflight: ErrorRow(400, "MessageNotInflight", "MessageNotInflight"),
    BatchError: ErrorRow(400, "BatchError", "BatchError"),  # codes come from the instance
    PurgeInProgress: ErrorRow(403, "PurgeQueueInProgress", "PurgeQueueInProgress"),
    StoreUnavailable: ErrorRow(503, "ServiceUnavailable", "ServiceUnavailable"),
    # a newer node migrated the database: this one stops (ops/schema_guard.py); the
    # requests it still answers meanwhile are for another node to serve
    SchemaTooNew: ErrorRow(503, "ServiceUnavailable", "ServiceUnavailable"),
    Unauthorized: ErrorRow(401, "MissingAuthenticationToken", "Unauthorized"),
    Forbidden: ErrorRow(403, "AccessDenied", "Forbidden"),
    PayloadTooLarge: ErrorRow(413, "RequestEntityTooLarge", "PayloadTooLarge"),
    # SQS's own throttling error (the `RequestThrottled` shape of its model). botocore's
    # legacy and standard retry modes and the JavaScript SDK's retry strategy all take
    # RequestThrottled, or any 429, for throttling: a consumer loop's receive is retried by
    # its SDK rather than dying on an error it never expected from ReceiveMessage.
    TooManyLongPolls: ErrorRow(429, "RequestThrottled", "TooManyLongPolls", retry_after_s=1),
    # the data given does not fill the template: the caller's input, so a 400
    RenderingError: ErrorRow(400, "BadRequestException", "RenderingFailure"),
    TidingsError: ErrorRow(500, "InternalFailure", "InternalFailure"),
}


def _row(exc: TidingsError) -> ErrorRow:
    for cls in type(exc).__mro__:
        row = ERROR_TABLE.get(cls)
        if row is not None:
            if isinstance(exc, BatchError):
                # SQS names each batch failure (EmptyBatchRequest, TooManyEntriesInBatchRequest…)
                return ErrorRow(row.status, exc.code, exc.code)
            return row
    return ERROR_TABLE[TidingsError]  # pragma: no cover - TidingsError is in every MRO


def error_info(exc: TidingsError) -> tuple[int, str, str]:
    """(HTTP status, AWS error code, message) for a tidings error: the wire layers' view."""
    row = _row(exc)
    return row.status, row.aws_code, exc.message


def retry_after(exc: TidingsError) -> int | None:
    """Seconds a throttled caller should wait before retrying, or None (not throttling)."""
    return _row(exc).retry_after_s


def native_error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        error["field"] = field
    return {"error": error}


def native_error(exc: TidingsError) -> dict[str, Any]:
    """The native `{"code", "message", "field"}` of an error, as batch results report it."""
    field = exc.field if isinstance(exc, ValidationError) else None
    error: dict[str, Any] = native_error_body(_row(exc).native_code, exc.message, field)["error"]
    return error


async def _tidings_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, TidingsError)
    row = _row(exc)
    status = row.status
    headers: dict[str, str] | None = None
    if status == 401:  # RFC 6750: a 401 says which scheme would be accepted
        headers = {"WWW-Authenticate": "Bearer"}
    elif row.retry_after_s is not None:  # RFC 9110 §10.2.3, with RFC 6585's 429
        headers = {"Retry-After": str(row.retry_after_s)}
    return JSONResponse({"error": native_error(exc)}, status_code=status, headers=headers)


#: Patterns in words: what a "must match" error says instead of the regex (a grammar's
#: pattern runs to kilobytes). The native API's rules register theirs (`rules.say`).
PATTERN_WORDS: dict[str, str] = {}


def _rule_of(err: Any) -> str:
    """A pydantic error's rule, in words: a pattern by its registered description, a
    validator's own message without pydantic's "Value error, " prefix."""
    kind, ctx = err.get("type"), err.get("ctx") or {}
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        words = PATTERN_WORDS.get(pattern)
        if words is not None:
            return words
        if len(pattern) > 80:
            return "must match the pattern the API's OpenAPI document gives"
    if kind == "value_error" and ctx.get("error") is not None:
        return str(ctx["error"])
    return str(err.get("msg", "is invalid"))


class FieldRule(ValueError):
    """A rule between fields of a request model (a model validator's), naming the field it
    reports: pydantic would name only the model, and the message says which field broke
    which rule. Raised inside a model validator, it answers 400 like any field's rule."""

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(rule)
        self.field = field
        self.rule = rule


def _field_of(loc: tuple[Any, ...], body: Any = None) -> str:
    """A request-validation location as a dotted field name: ("body", "entries", 0, "id")
    becomes "entries.0.id"; the source ("body", "query", "path") adds nothing useful. In
    a body, the location is walked along the request's own JSON, so the labels pydantic
    adds for a union's member (`target.webhook.destination`: the tag `webhook`) are left
    out and the name is the field's path in what the client sent."""
    parts = list(loc)
    source = parts.pop(0) if parts and parts[0] in ("body", "query", "path", "header",
                                                    "cookie") else None
    if source == "body" and body is not None:
        names, here = [], body
        for i, part in enumerate(parts):
            if isinstance(here, dict) and part in here:
                names.append(str(part))
                here = here[part]
            elif isinstance(here, list) and isinstance(part, int) and part < len(here):
                names.append(str(part))
                here = here[part]
            elif not isinstance(here, dict | list) or i == len(parts) - 1:
                if i == len(parts) - 1 and isinstance(here, dict):
                    names.append(str(part))  # a field that is missing
                break
        return ".".join(names) or "body"
    return ".".join(str(p) for p in parts) or "body"


async def _request_validation_error(_request: Request, exc: Exception) -> JSONResponse:
    # FastAPI answers 422 by default; the native API answers every bad input with 400 and
    # the same body shape as ValidationError, naming the field and the rule it broke.
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    details = []
    for err in errors:
        if err.get("type") == "json_invalid":
            field, rule = "body", "must be a valid JSON document"
        elif isinstance(cause := (err.get("ctx") or {}).get("error"), FieldRule):
            at = _field_of(tuple(err.get("loc", ())), exc.body)
            field = cause.field if at == "body" else f"{at}.{cause.field}"
            rule = cause.rule
        else:
            field, rule = _field_of(tuple(err.get("loc", ())), exc.body), _rule_of(err)
            if err.get("type") in ("union_tag_invalid", "union_tag_not_found"):
                # the tag's own field (`target.kind`), not the object that holds it
                tag = str((err.get("ctx") or {}).get("discriminator", "")).strip("'")
                field = f"{field}.{tag}" if field != "body" else tag
        details.append({"field": field, "rule": rule})
    first = details[0] if details else {"field": "body", "rule": "is invalid"}
    body = native_error_body("InvalidParameterValue", f"{first['field']}: {first['rule']}",
                             first["field"])
    body["error"]["details"] = details
    return JSONResponse(body, status_code=400)


#: Native codes for the statuses Starlette and FastAPI answer themselves.
_HTTP_CODES = {400: "InvalidParameterValue", 404: "NotFound", 405: "MethodNotAllowed"}


async def _http_error(_request: Request, exc: Exception) -> Response:
    # Starlette's own refusals (a body that is not parseable, no such route, a method the
    # route lacks) in the one error body, instead of FastAPI's `{"detail": ...}`.
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code < 400:
        return Response(status_code=exc.status_code, headers=exc.headers)
    code = _HTTP_CODES.get(exc.status_code, "HttpError")
    field = "body" if exc.status_code == 400 else None
    message = f"{field}: {exc.detail}" if field else str(exc.detail)
    return JSONResponse(native_error_body(code, message, field), status_code=exc.status_code,
                        headers=exc.headers)


def install_native_handlers(app: FastAPI) -> None:
    app.add_exception_handler(TidingsError, _tidings_error)
    app.add_exception_handler(RequestValidationError, _request_validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
