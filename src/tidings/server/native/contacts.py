"""Native API for contact lists and contacts, under /v1/email/contact-lists, and the log
of returned mail (bounces and complaints) at /v1/email/events. The same service as the SES
v2 list-management operations (`t.email.contacts`), in snake_case."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status
from pydantic import BaseModel, Field

from tidings.email.contacts import ContactFilter
from tidings.email.returns import Returned, parse_postmark, parse_ses
from tidings.errors import ValidationError
from tidings.model.contacts import subscription_status
from tidings.server.native.contact_views import (
    contact_json,
    contact_list_json,
    event_json,
    preferences_in,
    topics_in,
)
from tidings.server.native.deps import Ctx

router = APIRouter(prefix="/v1/email", tags=["email"])


class TopicIn(BaseModel):
    name: str
    display_name: str | None = None
    description: str | None = None
    default: str = Field("OPT_IN", description="OPT_IN or OPT_OUT: a contact's status for "
                         "this topic until it says otherwise")


class ContactListFieldsIn(BaseModel):
    description: str | None = None
    topics: list[TopicIn] = Field(default_factory=list)


class ContactListIn(ContactListFieldsIn):
    name: str


class ContactFieldsIn(BaseModel):
    topics: dict[str, str] | None = Field(None, description="topic → OPT_IN or OPT_OUT")
    unsubscribe_all: bool | None = None
    attributes: str | None = Field(None, description="A JSON object's text, kept as given")


class ContactIn(ContactFieldsIn):
    address: str


def _topics(body: ContactListFieldsIn) -> list[dict[str, Any]] | None:
    return topics_in([t.model_dump() for t in body.topics])


@router.post("/contact-lists", status_code=status.HTTP_201_CREATED)
async def create_contact_list(body: ContactListIn, ctx: Ctx) -> dict[str, Any]:
    """A list and its topics (SES CreateContactList); 409 when the name is taken."""
    row = await ctx.bridge.run(ctx.t.email.contacts.create_list, body.name, _topics(body),
                               body.description)
    return contact_list_json(row)


@router.get("/contact-lists")
async def list_contact_lists(ctx: Ctx, limit: Annotated[int, Query(ge=1, le=1000)] = 100,
                             next_token: str | None = None) -> dict[str, Any]:
    rows, token = await ctx.bridge.run(lambda: ctx.t.email.contacts.lists(
        limit=limit, next_token=next_token))
    return {"contact_lists": [contact_list_json(r) for r in rows], "next_token": token}


@router.get("/contact-lists/{name}")
async def get_contact_list(name: str, ctx: Ctx) -> dict[str, Any]:
    return contact_list_json(await ctx.bridge.run(ctx.t.email.contacts.get_list, name))


@router.put("/contact-lists/{name}")
async def update_contact_list(name: str, body: ContactListFieldsIn, ctx: Ctx,
                              ) -> dict[str, Any]:
    """Replace the topics and description (SES UpdateContactList)."""
    row = await ctx.bridge.run(ctx.t.email.contacts.update_list, name, _topics(body),
                               body.description)
    return contact_list_json(row)


@router.delete("/contact-lists/{name}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_contact_list(name: str, ctx: Ctx) -> Response:
    """The list and every contact in it."""
    await ctx.bridge.run(ctx.t.email.contacts.delete_list, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/contact-lists/{name}/contacts", status_code=status.HTTP_201_CREATED)
async def create_contact(name: str, body: ContactIn, ctx: Ctx) -> dict[str, Any]:
    row = await ctx.bridge.run(ctx.t.email.contacts.create_contact, name, body.address,
                               preferences_in(body.topics), bool(body.unsubscribe_all),
                               body.attributes)
    return contact_json(row)


@router.get("/contact-lists/{name}/contacts")
async def list_contacts(name: str, ctx: Ctx, status_: Annotated[
        str | None, Query(alias="status", description="OPT_IN or OPT_OUT")] = None,
        topic: str | None = None, use_default: bool = False,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        next_token: str | None = None) -> dict[str, Any]:
    """Contacts, by address; `status` (with `topic`, or of the whole list) filters them as
    SES ListContacts' Filter does."""
    where = ContactFilter(subscription_status("status", status_) if status_ else None,
                          topic, use_default)
    rows, token = await ctx.bridge.run(lambda: ctx.t.email.contacts.contacts(
        name, where=where, limit=limit, next_token=next_token))
    return {"contacts": [contact_json(r) for r in rows], "next_token": token}


@router.get("/contact-lists/{name}/contacts/{address}")
async def get_contact(name: str, address: str, ctx: Ctx) -> dict[str, Any]:
    return contact_json(await ctx.bridge.run(ctx.t.email.contacts.get_contact, name, address))


@router.put("/contact-lists/{name}/contacts/{address}")
async def update_contact(name: str, address: str, body: ContactFieldsIn, ctx: Ctx,
                         ) -> dict[str, Any]:
    """The given topic preferences replace the contact's (SES UpdateContact)."""
    row = await ctx.bridge.run(ctx.t.email.contacts.update_contact, name, address,
                               preferences_in(body.topics), body.unsubscribe_all,
                               body.attributes)
    return contact_json(row)


@router.delete("/contact-lists/{name}/contacts/{address}",
               status_code=status.HTTP_204_NO_CONTENT)
async def delete_contact(name: str, address: str, ctx: Ctx) -> Response:
    await ctx.bridge.run(ctx.t.email.contacts.delete_contact, name, address)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# returned mail ---------------------------------------------------------------------------

async def _record(ctx: Ctx, found: list[Returned]) -> dict[str, Any]:
    events = await ctx.bridge.run(ctx.t.email.returns.record, found)
    return {"recorded": [event_json(e) for e in events]}


@router.post("/events/ses")
async def ses_notification(request: Request, ctx: Ctx) -> dict[str, Any]:
    """An Amazon SES bounce or complaint notification in its SNS envelope (an SNS HTTPS
    subscription to the SES feedback topic). Hard bounces and complaints suppress the
    address; soft bounces are counted. With TIDINGS_SNS_VERIFY (the default) the SNS
    signature must hold (403 if not), and a SubscriptionConfirmation is confirmed by the
    node itself; without it a bare notification is taken too, and a
    SubscriptionConfirmation's SubscribeURL is answered back for its operator to follow."""
    body = await request.body()
    try:
        doc = json.loads(body or b"{}")
    except ValueError:
        raise ValidationError("body", "must be a JSON document") from None
    if not isinstance(doc, dict):
        raise ValidationError("body", "must be a JSON object")
    kind = doc.get("Type") or request.headers.get("x-amz-sns-message-type")
    if ctx.t.settings.sns_verify:
        await ctx.t.email.sns.verify(doc)
        if kind == "SubscriptionConfirmation":
            await ctx.t.email.sns.confirm(doc)
            return {"recorded": [], "confirmed": doc.get("TopicArn")}
    elif kind == "SubscriptionConfirmation":
        return {"recorded": [], "confirm": doc.get("SubscribeURL")}
    if kind == "UnsubscribeConfirmation":
        return {"recorded": []}
    return await _record(ctx, parse_ses(body))


@router.post("/events/postmark")
async def postmark_webhook(request: Request, ctx: Ctx) -> dict[str, Any]:
    """A Postmark bounce or spam-complaint webhook."""
    return await _record(ctx, parse_postmark(await request.body()))


@router.get("/events")
async def list_events(ctx: Ctx, address: str | None = None, delivery_id: str | None = None,
                      limit: Annotated[int, Query(ge=1, le=1000)] = 50,
                      next_token: str | None = None) -> dict[str, Any]:
    """Bounces and complaints, newest first, with the delivery each was matched to."""
    rows, token = await ctx.bridge.run(lambda: ctx.t.email.returns.events(
        address=address, delivery_id=delivery_id, limit=limit, next_token=next_token))
    return {"events": [event_json(e) for e in rows], "next_token": token}
