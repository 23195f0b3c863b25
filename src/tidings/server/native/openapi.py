"""The native API's OpenAPI document, made to tell the truth about errors.

FastAPI documents a 422 with its own validation body on every operation that takes input,
and leaves the error statuses an endpoint lists without a body. tidings answers bad input
with 400, and every error, whatever its status, with one body (`server/errors.py`):
`{"error": {"code", "message", "field"?, "details"?}}`. This rewrites the generated
document once, so clients generated from it, and the schema-driven fuzzer that checks it
(tests/integration/test_fuzz_native.py), see what the server really answers:

* 422 goes; 400 (bad input), 401/403 (tokens, when configured), 413/414/431 (request
  limits) and 503 (the database cannot write or be reached now: retry) are on every
  operation; 404 on every operation that names a resource in its path;
* every error response carries the error body's schema.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

ERROR_SCHEMA = "Error"
ERROR_BODY_SCHEMA = "ErrorBody"

_SCHEMAS: dict[str, Any] = {
    ERROR_SCHEMA: {
        "type": "object",
        "required": ["code", "message"],
        "properties": {
            "code": {"type": "string", "description": "What went wrong, e.g. "
                     "InvalidParameterValue, QueueNotFound, ServiceUnavailable."},
            "message": {"type": "string", "description": "For people: names the field and "
                        "the rule it broke."},
            "field": {"type": "string", "description": "The field at fault, for bad input."},
            "details": {"type": "array", "description": "Every field at fault, when the "
                        "request broke several rules.",
                        "items": {"type": "object", "required": ["field", "rule"],
                                  "properties": {"field": {"type": "string"},
                                                 "rule": {"type": "string"}}}},
        },
    },
    ERROR_BODY_SCHEMA: {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"$ref": f"#/components/schemas/{ERROR_SCHEMA}"}},
    },
}

#: Statuses any native operation can answer, with what they mean.
_EVERYWHERE: dict[str, str] = {
    "400": "Bad input: code InvalidParameterValue with `error.field` naming the field and "
           "`error.details` every rule broken.",
    "401": "No valid bearer token (only when the node has API tokens configured).",
    "403": "The token's scope does not allow this operation.",
    "413": "The request body is larger than the API allows (RequestEntityTooLarge).",
    "414": "The query string is too long.",
    "431": "The request headers are too large.",
    "503": "The database cannot write or be reached now (ServiceUnavailable), e.g. its disk "
           "is full: nothing was stored; retry later. A damaged SQLite file answers this too, "
           "until it is restored from a backup.",
}
_NAMED = "404"
_NAMED_TEXT = "The resource named in the path does not exist."


def truthful_errors(doc: dict[str, Any]) -> dict[str, Any]:
    """Rewrite `doc` (a FastAPI OpenAPI document) in place; returns it."""
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(_SCHEMAS)
    body = {"application/json": {"schema": {"$ref": f"#/components/schemas/{ERROR_BODY_SCHEMA}"}}}
    for path, item in doc.get("paths", {}).items():
        if not path.startswith(("/v1/", "/unsubscribe/")):
            continue
        for operation in item.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses: dict[str, Any] = operation["responses"]
            responses.pop("422", None)
            wanted = dict(_EVERYWHERE)
            if "{" in path:
                wanted[_NAMED] = _NAMED_TEXT
            for status, text in wanted.items():
                responses.setdefault(status, {"description": text})
            for status, response in responses.items():
                if status[:1] in ("4", "5") and "content" not in response:
                    response["content"] = body
    return doc


def install(app: FastAPI) -> None:
    """Make `app.openapi()` (and /openapi.json) serve the rewritten document."""
    generate: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = truthful_errors(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
