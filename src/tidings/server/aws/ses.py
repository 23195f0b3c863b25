"""The Amazon SES v2 wire API (REST-JSON), the subset tidings serves, for the SDKs and CLI.

Paths, methods and error names are those of botocore's `sesv2/2019-09-27` model:
templates (`/v2/email/templates[/{TemplateName}[/render]]`), sending
(`/v2/email/outbound-emails`, `/v2/email/outbound-bulk-emails`) and the account
suppression list (`/v2/email/suppression/addresses[/{EmailAddress}]`). Plain Starlette
routes, like the Scheduler API: the bodies are SES's shapes (`ses_shapes.py`), every store
call goes through the bridge, and sends go through `t.email.send`, so they are logged and
delivered by the node with retries. A send's MessageId is its delivery id
(`GET /v1/email/deliveries/{id}`, `tidings email log`).

As in SES, a send is accepted before delivery: a message whose recipients are all
suppressed still gets a MessageId and is dropped (logged SUPPRESSED); one with some
suppressed recipients goes to the others. A template rendering failure found at delivery
is logged RENDERING_FAILURE, as SES reports it as an event rather than an error.

Errors are REST-JSON's: the status, `x-amzn-ErrorType` (what the SDKs read the code from)
and `{"message": ...}`. UnknownOperationException (404) for every other method and path
under `/v2/email`, naming the SES v2 operation tidings does not implement when there is
one (`sesv2_operations.txt`), NotFoundException (404), AlreadyExistsException (400),
BadRequestException (400: validation and rendering failures), MessageRejected (400: a
Content.Raw message tidings cannot send, e.g. too large or without recipients),
InvalidNextTokenException (400, ListSuppressedDestinations). Requests are checked with
SigV4 (service `ses`, what the SDKs sign sesv2 calls with) whenever access keys are set.
"""

from __future__ import annotations

import functools
import importlib.resources
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.client import Tidings
from tidings.email.identities import SenderNotVerified
from tidings.email.service import check_template_name
from tidings.email.suppression import reason_of
from tidings.errors import NotFoundError, StoreUnavailable, TidingsError, ValidationError
from tidings.model.email import SuppressionReason
from tidings.model.queues import check_range
from tidings.runtime.bridge import Bridge
from tidings.server.aws.auth import Authenticator
from tidings.server.aws.grants import SES_NOT_AUDITED, action_name
from tidings.server.aws.restjson import (
    AWS_KEY,
    OperationIndex,
    RestJsonError,
    catch_all_routes,
    endpoint,
    unknown_operation,
)
from tidings.server.aws.scheduler_shapes import parse_body
from tidings.server.aws.ses_contacts import ContactApi
from tidings.server.aws.ses_identities import IdentityApi
from tidings.server.aws.ses_shapes import (
    bulk_messages,
    page_suppressions,
    reasons_in,
    rendered_mime,
    seconds,
    suppression_out,
    template_in,
    template_out,
    time_in,
)
from tidings.server.errors import error_info
from tidings.server.limits import SES_MAX_BODY

log = logging.getLogger("tidings.ses")

Doc = dict[str, Any]
Operation = Callable[[Request, Doc], Awaitable[Doc]]

MAX_REQUEST_BYTES = SES_MAX_BODY  # SES's 10 MB raw message in base64 (tidings sends 640 KiB)

#: SES v2's error names, by the status the error table gives a tidings error. SES answers
#: 400 for "already exists", where the table says 409.
_CODES = {400: (400, "BadRequestException"), 403: (400, "BadRequestException"),
          404: (404, "NotFoundException"), 409: (400, "AlreadyExistsException"),
          429: (429, "TooManyRequestsException"), 503: (503, "ServiceUnavailable")}


class SesError(RestJsonError):
    """An error of this API, answered as is."""


@functools.cache
def ses_operations() -> OperationIndex:
    """Every SES v2 operation by method and path (read once, when first needed)."""
    text = importlib.resources.files(__package__).joinpath("sesv2_operations.txt")
    return OperationIndex.parse(text.read_text(encoding="utf-8"))


def _aws_error(exc: TidingsError) -> SesError:
    status, _code, message = error_info(exc)
    if isinstance(exc, ValidationError) and exc.field.startswith("Content.Raw") or \
            isinstance(exc, SenderNotVerified):
        return SesError(400, "MessageRejected", message)
    status, code = _CODES.get(status, (500, "InternalFailure"))
    return SesError(status, code, message)


class SesApi:
    """The SES v2 operations over one `Tidings`."""

    def __init__(self, t: Tidings, bridge: Bridge) -> None:
        self.t = t
        self.email = t.email
        self.bridge = bridge
        self.auth = Authenticator.from_settings(t.settings, t.clock, "ses")
        self.identity_api = IdentityApi(t.email.identities, bridge)
        self.contact_api = ContactApi(t.email.contacts, bridge)

    def routes(self) -> list[Route]:
        templates, suppressed = "/v2/email/templates", "/v2/email/suppression/addresses"
        table: list[tuple[str, str, Operation]] = [
            (templates, "POST", self.create_template),
            (templates, "GET", self.list_templates),
            (templates + "/{TemplateName}", "GET", self.get_template),
            (templates + "/{TemplateName}", "PUT", self.update_template),
            (templates + "/{TemplateName}", "DELETE", self.delete_template),
            (templates + "/{TemplateName}/render", "POST", self.test_render),
            ("/v2/email/outbound-emails", "POST", self.send_email),
            ("/v2/email/outbound-bulk-emails", "POST", self.send_bulk_email),
            (suppressed, "PUT", self.put_suppressed),
            (suppressed, "GET", self.list_suppressed),
            (suppressed + "/{EmailAddress}", "GET", self.get_suppressed),
            (suppressed + "/{EmailAddress}", "DELETE", self.delete_suppressed),
            *self.contact_api.table(),
            ("/v2/email/identities", "POST", self.identity_api.create_email_identity),
            # the older models GET the collection; botocore's current one POSTs here
            ("/v2/email/identities", "GET", self.identity_api.list_email_identities),
            ("/v2/email/list-identities", "POST", self.identity_api.list_email_identities),
            ("/v2/email/identities/{EmailIdentity}", "GET",
             self.identity_api.get_email_identity),
            ("/v2/email/identities/{EmailIdentity}", "DELETE",
             self.identity_api.delete_email_identity),
        ]
        routes = [Route(path, self._endpoint(op), methods=[method])
                  for path, method, op in table]
        # Last, so every route above wins where it matches.
        refuse = endpoint(unknown_operation("Amazon SES v2", ses_operations()), self.auth,
                          service="SES", message_key="message", limit=MAX_REQUEST_BYTES,
                          too_long_code="MessageRejected", to_aws=_aws_error,
                          internal_code="InternalFailure")
        return routes + catch_all_routes(["/v2/email"], refuse)

    def _endpoint(self, op: Operation) -> Callable[[Request], Awaitable[Response]]:
        audited = op.__name__ not in SES_NOT_AUDITED
        action = f"ses:{action_name(op.__name__)}"

        async def call(request: Request, body: bytes) -> Doc:
            result = await op(request, parse_body(body))
            if audited and request.method != "GET":
                await self.bridge.run(self.t.audit.record,
                                      request.scope.get(AWS_KEY) or "anonymous", "ses",
                                      action, request.url.path)
            return result

        return endpoint(call, self.auth, service="SES", message_key="message",
                        limit=MAX_REQUEST_BYTES, too_long_code="MessageRejected",
                        to_aws=_aws_error, internal_code="InternalFailure")

    # templates --------------------------------------------------------------------------------

    async def create_template(self, _request: Request, body: Doc) -> Doc:
        # Tags are accepted and not kept: tidings templates carry none.
        name = body.get("TemplateName")
        if not isinstance(name, str):
            raise ValidationError("TemplateName", "is required")
        check_template_name(name)
        subject, html, text = template_in(body)
        await self.bridge.run(self.email.create_template, name, subject, html, text)
        return {}

    async def get_template(self, request: Request, _body: Doc) -> Doc:
        row = await self.bridge.run(self.email.get_template, request.path_params["TemplateName"])
        return template_out(row)

    async def update_template(self, request: Request, body: Doc) -> Doc:
        subject, html, text = template_in(body)
        await self.bridge.run(self.email.update_template, request.path_params["TemplateName"],
                              subject, html, text)
        return {}

    async def delete_template(self, request: Request, _body: Doc) -> Doc:
        await self.bridge.run(self.email.delete_template, request.path_params["TemplateName"])
        return {}

    async def list_templates(self, request: Request, _body: Doc) -> Doc:
        q = request.query_params
        limit = _page_size(q.get("PageSize"), 100)
        rows, token = await self.bridge.run(self.email.list_templates, limit=limit,
                                            next_token=q.get("NextToken") or None)
        out: Doc = {"TemplatesMetadata": [
            {"TemplateName": r.name, "CreatedTimestamp": seconds(r.created_at)} for r in rows]}
        if token:
            out["NextToken"] = token
        return out

    async def test_render(self, request: Request, body: Doc) -> Doc:
        data = body.get("TemplateData")
        if not isinstance(data, str):
            raise ValidationError("TemplateData", "is required: a JSON object in a string")
        rendered = await self.bridge.run(self.email.render,
                                         request.path_params["TemplateName"], data)
        message_id = f"{uuid.uuid4()}@tidings.invalid"
        return {"RenderedTemplate": rendered_mime(rendered, self.t.clock.now_ms(), message_id)}

    # sending --------------------------------------------------------------------------------

    async def send_email(self, _request: Request, body: Doc) -> Doc:
        # ConfigurationSetName travels as the X-SES-CONFIGURATION-SET header (sesv2.py);
        # ListManagementOptions sets the List-Unsubscribe scope. Identity ARNs, feedback
        # addresses, tenants and tracking overrides are accepted and have no effect here.
        delivery = await self.bridge.run(self.email.send, body)
        return {"MessageId": delivery.id}

    async def send_bulk_email(self, _request: Request, body: Doc) -> Doc:
        template, items = bulk_messages(body)

        def send_all() -> list[Doc]:
            self.email.compiled(template)  # a missing template fails the whole request
            results: list[Doc] = []
            for item in items:
                if isinstance(item, ValidationError):
                    results.append({"Status": "INVALID_PARAMETER", "Error": item.message})
                    continue
                try:
                    delivery = self.email.send(item)
                except StoreUnavailable as exc:
                    results.append({"Status": "TRANSIENT_FAILURE", "Error": exc.message})
                except TidingsError as exc:
                    results.append({"Status": "FAILED", "Error": exc.message})
                else:
                    results.append({"Status": "SUCCESS", "MessageId": delivery.id})
            return results

        return {"BulkEmailEntryResults": await self.bridge.run(send_all)}

    # the suppression list ---------------------------------------------------------------------

    async def put_suppressed(self, _request: Request, body: Doc) -> Doc:
        address, raw_reason = body.get("EmailAddress"), body.get("Reason")
        if not isinstance(address, str):
            raise ValidationError("EmailAddress", "is required")
        if not isinstance(raw_reason, str):
            raise ValidationError("Reason", "is required: BOUNCE or COMPLAINT "
                                  "(tidings also takes UNSUBSCRIBE and MANUAL)")
        reason = reason_of(raw_reason)

        def put() -> None:
            # A put sets the reason, as in SES; the same reason again changes nothing.
            current = self.email.suppression(address)
            if current is not None and current.reason is reason:
                return
            if current is not None:
                self.email.unsuppress(address)
            self.email.suppress(address, reason)

        await self.bridge.run(put)
        return {}

    async def get_suppressed(self, request: Request, _body: Doc) -> Doc:
        address = request.path_params["EmailAddress"]
        row = await self.bridge.run(self.email.suppression, address)
        if row is None:
            raise _not_listed(address)
        return {"SuppressedDestination": suppression_out(row)}

    async def delete_suppressed(self, request: Request, _body: Doc) -> Doc:
        address = request.path_params["EmailAddress"]
        if not await self.bridge.run(self.email.unsuppress, address):
            raise _not_listed(address)
        return {}

    async def list_suppressed(self, request: Request, _body: Doc) -> Doc:
        q = request.query_params
        reasons: frozenset[SuppressionReason] | None = reasons_in(q.getlist("Reason"))
        start, end = time_in("StartDate", q.get("StartDate")), time_in("EndDate", q.get("EndDate"))
        limit = _page_size(q.get("PageSize"), 1000)
        try:
            rows, token = await self.bridge.run(page_suppressions, self.email, reasons, start,
                                                end, limit, q.get("NextToken") or None)
        except ValidationError as exc:
            if exc.field == "NextToken":
                raise SesError(400, "InvalidNextTokenException", exc.message) from None
            raise
        out: Doc = {"SuppressedDestinationSummaries": [suppression_out(r) for r in rows]}
        if token:
            out["NextToken"] = token
        return out


def _page_size(raw: str | None, most: int) -> int:
    return 100 if raw is None else check_range("PageSize", raw, 1, most)


def _not_listed(address: str) -> NotFoundError:
    return NotFoundError(address, f"Email address {address} does not exist on your "
                                  "suppression list.")


def ses_routes(t: Tidings, bridge: Bridge) -> list[Route]:
    """The SES v2 API's routes. Mount them before the SQS routes, whose catch-all paths
    would otherwise take `/v2/email/...`."""
    return SesApi(t, bridge).routes()
