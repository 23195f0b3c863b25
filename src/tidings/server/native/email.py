"""Native API for email under /v1/email, and the unsubscribe pages at /unsubscribe/{token}.

- templates: create, list, get, replace, delete, and a render preview;
- send: a SES v2 SendEmail document, accepted (202) and delivered by the delivery queue;
- deliveries: the log, newest first, by recipient or state;
- suppressions: the account-level list.

Unsubscribe (RFC 8058): mail clients POST `List-Unsubscribe=One-Click` to the URL of the
`List-Unsubscribe` header, without cookies or redirects, and expect a 2xx. A person who
opens the link gets a page whose button makes the same POST: a GET never unsubscribes,
since link scanners and prefetchers follow every GET in a message.
"""

from __future__ import annotations

import html
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response, status
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.config import JsonDict

from tidings.clock import to_ms
from tidings.email.templates import RenderingError
from tidings.errors import NotFoundError, ValidationError
from tidings.model.email import SuppressionReason
from tidings.server.errors import native_error_body
from tidings.server.native.deps import Ctx
from tidings.server.native.email_views import delivery_json, suppression_json, template_json
from tidings.server.native.rules import (
    DeliveryStateName,
    EmailAddress,
    In,
    Instant,
    SuppressionReasonName,
    TemplateName,
)
from tidings.server.native.send_models import SendEmailIn

router = APIRouter(prefix="/v1/email", tags=["email"])
unsubscribe_router = APIRouter(tags=["email"])


#: A template has an HTML part, a text part or both (SES's rule), stated in the document too.
_A_PART: JsonDict = {"anyOf": [
    {"required": [part], "properties": {part: {"type": "string", "minLength": 1}}}
    for part in ("html", "text")]}


class TemplateFieldsIn(In):
    model_config = ConfigDict(json_schema_extra=_A_PART)

    subject: Annotated[str, StringConstraints(pattern=r"^[^\x00]*$")] = Field(
        description="No NUL character (SES refuses it).")
    html: str | None = None
    text: str | None = None

    @model_validator(mode="after")
    def _has_a_part(self) -> TemplateFieldsIn:
        if not self.html and not self.text:
            raise ValueError("give html, text or both")
        return self


class TemplateIn(TemplateFieldsIn):
    name: TemplateName


class RenderIn(BaseModel):
    data: dict[str, Any] | str = Field(default_factory=dict,
                                       description="An object, or its JSON text (TemplateData).")


class SuppressIn(In):
    reason: SuppressionReasonName = SuppressionReason.MANUAL


# templates ---------------------------------------------------------------------------------

@router.post("/templates", status_code=status.HTTP_201_CREATED, responses={
    409: {"description": "A template of this name exists (ConflictException)."}})
async def create_template(body: TemplateIn, ctx: Ctx) -> dict[str, Any]:
    """Store a template (SES CreateEmailTemplate); 409 when the name is taken."""
    row = await ctx.bridge.run(ctx.t.email.create_template, body.name, body.subject,
                               body.html, body.text)
    return template_json(row)


@router.get("/templates")
async def list_templates(ctx: Ctx, limit: Annotated[int, Query(ge=1, le=1000)] = 100,
                         next_token: str | None = None) -> dict[str, Any]:
    rows, token = await ctx.bridge.run(ctx.t.email.list_templates, limit=limit,
                                       next_token=next_token)
    return {"templates": [template_json(r) for r in rows], "next_token": token}


@router.get("/templates/{name}")
async def get_template(name: TemplateName, ctx: Ctx) -> dict[str, Any]:
    return template_json(await ctx.bridge.run(ctx.t.email.get_template, name))


@router.put("/templates/{name}")
async def update_template(name: TemplateName, body: TemplateFieldsIn, ctx: Ctx) -> dict[str, Any]:
    """Replace every part of the template (SES UpdateEmailTemplate)."""
    row = await ctx.bridge.run(ctx.t.email.update_template, name, body.subject, body.html,
                               body.text)
    return template_json(row)


@router.delete("/templates/{name}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_template(name: TemplateName, ctx: Ctx) -> Response:
    await ctx.bridge.run(ctx.t.email.delete_template, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/templates/{name}/render", response_model=None)
async def render_template(name: TemplateName, body: RenderIn,
                          ctx: Ctx) -> dict[str, Any] | JSONResponse:
    """Preview (SES TestRenderEmailTemplate). Missing data answers 400 RenderingFailure."""
    try:
        out = await ctx.bridge.run(ctx.t.email.render, name, body.data)
    except RenderingError as exc:
        return JSONResponse(native_error_body("RenderingFailure", exc.message), status_code=400)
    return {"subject": out.subject, "html": out.html, "text": out.text}


# sending and the log --------------------------------------------------------------------------

@router.post("/send", status_code=status.HTTP_202_ACCEPTED, responses={
    404: {"description": "The named template does not exist (NotFoundException)."}})
async def send(body: SendEmailIn, ctx: Ctx) -> dict[str, Any]:
    """Accept a SES v2 SendEmail document; the answer's `id` finds it in the log."""
    delivery = await ctx.bridge.run(ctx.t.email.send, body.document())
    return {"id": delivery.id, "message_id": delivery.message_id, "state": delivery.state.value}


class ResendIn(In):
    message_id: str | None = None
    recipient: str | None = None
    campaign: str | None = None
    state: Literal["FAILED", "RENDERING_FAILURE"] | None = Field(
        None, description="FAILED or RENDERING_FAILURE (default both)")
    since: Instant | None = Field(None, description="Accepted at or after (RFC 3339)")
    until: Instant | None = Field(None, description="Accepted before (RFC 3339)")


@router.post("/resend")
async def resend(body: ResendIn, ctx: Ctx) -> dict[str, Any]:
    """Put failed deliveries matching every given filter back in line, once each."""
    since = to_ms(body.since, "since") if body.since else None
    until = to_ms(body.until, "until") if body.until else None
    outcome = await ctx.bridge.run(lambda: ctx.t.email.resend(
        message_id=body.message_id, recipient=body.recipient, campaign=body.campaign,
        state=body.state, since=since, until=until))
    return {"resent": outcome.resent,
            "skipped": [{"id": i, "reason": why} for i, why in outcome.skipped]}


@router.get("/status")
async def email_status(ctx: Ctx) -> dict[str, Any]:
    """Email waiting to be sent (accepted, not yet taken by a node with an SMTP relay,
    or being retried), and whether this node has a relay."""
    waiting = await ctx.bridge.run(ctx.t.email.waiting)
    return {"waiting": waiting, "relay": bool(ctx.t.settings.smtp_url)}


@router.get("/deliveries")
async def list_deliveries(ctx: Ctx, recipient: str | None = None,
                          state: DeliveryStateName | None = None,
                          limit: Annotated[int, Query(ge=1, le=1000)] = 50,
                          next_token: str | None = None) -> dict[str, Any]:
    rows, token = await ctx.bridge.run(ctx.t.email.log, recipient=recipient, state=state,
                                       limit=limit, next_token=next_token)
    return {"deliveries": [delivery_json(d) for d in rows], "next_token": token}


@router.get("/deliveries/{delivery_id}")
async def get_delivery(delivery_id: str, ctx: Ctx) -> dict[str, Any]:
    return delivery_json(await ctx.bridge.run(ctx.t.email.get_delivery, delivery_id))


# suppression list --------------------------------------------------------------------------------

@router.get("/suppressions")
async def list_suppressions(ctx: Ctx, reason: SuppressionReasonName | None = None,
                            limit: Annotated[int, Query(ge=1, le=1000)] = 100,
                            next_token: str | None = None) -> dict[str, Any]:
    rows, token = await ctx.bridge.run(ctx.t.email.list_suppressions, reason=reason,
                                       limit=limit, next_token=next_token)
    return {"suppressions": [suppression_json(s) for s in rows], "next_token": token}


@router.get("/suppressions/{address}")
async def get_suppression(address: EmailAddress, ctx: Ctx) -> dict[str, Any]:
    entry = await ctx.bridge.run(ctx.t.email.suppression, address)
    if entry is None:
        raise NotFoundError(address, f"{address} is not on the suppression list.")
    return suppression_json(entry)


@router.put("/suppressions/{address}")
async def put_suppression(address: EmailAddress, body: SuppressIn, ctx: Ctx) -> dict[str, Any]:
    """Suppress an address; an address already listed keeps its first reason."""
    await ctx.bridge.run(ctx.t.email.suppress, address, body.reason)
    return await get_suppression(address, ctx)


@router.delete("/suppressions/{address}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_suppression(address: EmailAddress, ctx: Ctx) -> Response:
    if not await ctx.bridge.run(ctx.t.email.unsuppress, address):
        raise NotFoundError(address, f"{address} is not on the suppression list.")
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# unsubscribe ------------------------------------------------------------------------------------

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>{title}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}}
button{{font-size:1rem;padding:.6rem 1.2rem}}</style></head>
<body><h1>{title}</h1>{body}</body></html>"""


#: A token is signed by this deployment for one address; any other is "not valid" (a page).
_LINK_NOT_VALID: dict[int | str, dict[str, Any]] = {
    400: {"description": "The link is not one this deployment made (an HTML page).",
          "content": {"text/html": {"schema": {"type": "string"}}}}}


def _page(title: str, body: str, status_code: int = 200) -> HTMLResponse:
    return HTMLResponse(_PAGE.format(title=html.escape(title), body=body),
                        status_code=status_code,
                        headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"})


@unsubscribe_router.get("/unsubscribe/{token}", response_class=HTMLResponse,
                        responses=_LINK_NOT_VALID)
async def unsubscribe_page(token: str, ctx: Ctx) -> HTMLResponse:
    """A confirmation page: its button POSTs back here. Viewing it changes nothing."""
    try:
        request = await ctx.bridge.run(ctx.t.email.check_unsubscribe, token)
    except ValidationError:
        return _page("Link not valid", "<p>This unsubscribe link is not valid.</p>", 400)
    what = "email" if request.list_id is None else \
        await ctx.bridge.run(ctx.t.email.contacts.label, request.list_id)
    body = (f"<p>Stop sending {html.escape(what)} to "
            f"<strong>{html.escape(masked(request.address))}</strong>?</p>"
            '<form method="post"><input type="hidden" name="List-Unsubscribe" '
            'value="One-Click"><button type="submit">Unsubscribe</button></form>')
    return _page("Unsubscribe", body)


@unsubscribe_router.post("/unsubscribe/{token}", response_class=HTMLResponse,
                        responses=_LINK_NOT_VALID)
async def unsubscribe(token: str, ctx: Ctx) -> HTMLResponse:
    """RFC 8058 one-click (body `List-Unsubscribe=One-Click`) or the page's button: opts
    the contact out of the topic (or the list) the mail named; mail that named no contact
    list puts the address on the suppression list (reason UNSUBSCRIBE). Repeating it is
    harmless."""
    try:
        request = await ctx.bridge.run(ctx.t.email.unsubscribe, token)
    except ValidationError:
        return _page("Link not valid", "<p>This unsubscribe link is not valid.</p>", 400)
    what = "email" if request.list_id is None else \
        await ctx.bridge.run(ctx.t.email.contacts.label, request.list_id)
    return _page("Unsubscribed", f"<p>{html.escape(masked(request.address))} will get no "
                 f"more {html.escape(what)} from us.</p>")


def masked(address: str) -> str:
    """`a•••@example.org`: enough for its owner to recognise, little for anyone else who
    sees the page (a forwarded message, a shared screen)."""
    local, _, domain = address.partition("@")
    return f"{local[:1]}\u2022\u2022\u2022@{domain}"
