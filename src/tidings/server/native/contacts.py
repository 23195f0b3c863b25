"""Native API for contact lists and contacts, under /v1/email/contact-lists, and the log
of returned mail (bounces and complaints) at /v1/email/events. The same service as the SES
v2 list-management operations (`t.email.contacts`), in snake_case."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status
from pydantic import Field, StringConstraints, WithJsonSchema

from tidings.email.contacts import ContactFilter
from tidings.email.returns import Returned, parse_postmark, parse_ses
from tidings.errors import ValidationError
from tidings.model.contacts import MAX_ATTRIBUTES, MAX_TOPICS, subscription_status
from tidings.server.native.contact_views import (
    contact_json,
    contact_list_json,
    event_json,
    preferences_in,
    topics_in,
)
from tidings.server.native.deps import Ctx, Responses
from tidings.server.native.rules import (
    ContactListName,
    DisplayName,
    EmailAddress,
    In,
    ListDescription,
    PageOf1000,
    SubscriptionStatusName,
    Text,
)

#: AttributesData: a JSON object's text (that it is one is the engine's to check).
Attributes = Annotated[str, StringConstraints(max_length=MAX_ATTRIBUTES),
                       WithJsonSchema({"type": "string", "maxLength": MAX_ATTRIBUTES,
                                       "contentMediaType": "application/json"})]

router = APIRouter(prefix="/v1/email", tags=["email"])


#: The document's 404 of every contact-list operation.
_DOCS: Responses = {404: {"description": "No such contact list (NotFoundException) or "
                          "contact."}}
_TAKEN: Responses = {409: {"description": "The name (or address) is taken "
                           "(ConflictException)."}}


class TopicIn(In):
    name: ContactListName = Field(description="1-64 letters, digits, _ and -; once per list.")
    display_name: DisplayName | None = Field(None, description="1-128 characters, not only "
                                             "white space (default: the name).")
    description: ListDescription | None = Field(None, description="Up to 500 characters.")
    default: SubscriptionStatusName = Field("OPT_IN", description="OPT_IN or OPT_OUT: a "
                                            "contact's status for this topic until it says "
                                            "otherwise")


class ContactListFieldsIn(In):
    description: ListDescription | None = Field(None, description="Up to 500 characters.")
    topics: list[TopicIn] = Field(default_factory=list, max_length=MAX_TOPICS,
                                  description="Up to 20 topics, each name once.")


class ContactListIn(ContactListFieldsIn):
    name: ContactListName = Field(description="1-64 letters, digits, _ and -.")


class ContactFieldsIn(In):
    topics: dict[ContactListName, SubscriptionStatusName] | None = Field(
        None, json_schema_extra={"additionalProperties": False},
        description="topic → OPT_IN or OPT_OUT (each a topic of the list)")
    unsubscribe_all: bool | None = None
    attributes: Attributes | None = Field(None, description="A JSON object's text (up to "
                                          "1000 characters), kept as given")


class ContactIn(ContactFieldsIn):
    address: EmailAddress


def _topics(body: ContactListFieldsIn) -> list[dict[str, Any]] | None:
    return topics_in([t.model_dump() for t in body.topics])


@router.post("/contact-lists", status_code=status.HTTP_201_CREATED, responses=_TAKEN)
async def create_contact_list(body: ContactListIn, ctx: Ctx) -> dict[str, Any]:
    """A list and its topics (SES CreateContactList); 409 when the name is taken."""
    row = await ctx.bridge.run(ctx.t.email.contacts.create_list, body.name, _topics(body),
                               body.description)
    return contact_list_json(row)


@router.get("/contact-lists")
async def list_contact_lists(ctx: Ctx, limit: PageOf1000 = 100,
                             next_token: str | None = None) -> dict[str, Any]:
    rows, token = await ctx.bridge.run(lambda: ctx.t.email.contacts.lists(
        limit=limit, next_token=next_token))
    return {"contact_lists": [contact_list_json(r) for r in rows], "next_token": token}


@router.get("/contact-lists/{name}", responses=_DOCS)
async def get_contact_list(name: ContactListName, ctx: Ctx) -> dict[str, Any]:
    return contact_list_json(await ctx.bridge.run(ctx.t.email.contacts.get_list, name))


@router.put("/contact-lists/{name}", responses=_DOCS)
async def update_contact_list(name: ContactListName, body: ContactListFieldsIn, ctx: Ctx,
                              ) -> dict[str, Any]:
    """Replace the topics and description (SES UpdateContactList)."""
    row = await ctx.bridge.run(ctx.t.email.contacts.update_list, name, _topics(body),
                               body.description)
    return contact_list_json(row)


@router.delete("/contact-lists/{name}", status_code=status.HTTP_204_NO_CONTENT,
               responses=_DOCS)
async def delete_contact_list(name: ContactListName, ctx: Ctx) -> Response:
    """The list and every contact in it."""
    await ctx.bridge.run(ctx.t.email.contacts.delete_list, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/contact-lists/{name}/contacts", status_code=status.HTTP_201_CREATED,
             responses=_DOCS | _TAKEN)
async def create_contact(name: ContactListName, body: ContactIn, ctx: Ctx) -> dict[str, Any]:
    row = await ctx.bridge.run(ctx.t.email.contacts.create_contact, name, body.address,
                               preferences_in(body.topics), bool(body.unsubscribe_all),
                               body.attributes)
    return contact_json(row)


@router.get("/contact-lists/{name}/contacts", responses=_DOCS)
async def list_contacts(name: ContactListName, ctx: Ctx, status_: Annotated[
        SubscriptionStatusName | None, Query(alias="status", description="OPT_IN or OPT_OUT")
        ] = None,
        topic: Annotated[ContactListName | None, Query(description="A topic of the list.")
                         ] = None,
        use_default: bool = False, limit: PageOf1000 = 100,
        next_token: str | None = None) -> dict[str, Any]:
    """Contacts, by address; `status` (with `topic`, or of the whole list) filters them as
    SES ListContacts' Filter does."""
    where = ContactFilter(subscription_status("status", status_) if status_ else None,
                          topic, use_default)
    rows, token = await ctx.bridge.run(lambda: ctx.t.email.contacts.contacts(
        name, where=where, limit=limit, next_token=next_token))
    return {"contacts": [contact_json(r) for r in rows], "next_token": token}


@router.get("/contact-lists/{name}/contacts/{address}", responses=_DOCS)
async def get_contact(name: ContactListName, address: EmailAddress, ctx: Ctx) -> dict[str, Any]:
    return contact_json(await ctx.bridge.run(ctx.t.email.contacts.get_contact, name, address))


@router.put("/contact-lists/{name}/contacts/{address}", responses=_DOCS)
async def update_contact(name: ContactListName, address: EmailAddress,
                         body: ContactFieldsIn, ctx: Ctx) -> dict[str, Any]:
    """The given topic preferences replace the contact's (SES UpdateContact)."""
    row = await ctx.bridge.run(ctx.t.email.contacts.update_contact, name, address,
                               preferences_in(body.topics), body.unsubscribe_all,
                               body.attributes)
    return contact_json(row)


@router.delete("/contact-lists/{name}/contacts/{address}",
               status_code=status.HTTP_204_NO_CONTENT, responses=_DOCS)
async def delete_contact(name: ContactListName, address: EmailAddress, ctx: Ctx) -> Response:
    await ctx.bridge.run(ctx.t.email.contacts.delete_contact, name, address)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# returned mail ---------------------------------------------------------------------------

async def _record(ctx: Ctx, found: list[Returned]) -> dict[str, Any]:
    events = await ctx.bridge.run(ctx.t.email.returns.record, found)
    return {"recorded": [event_json(e) for e in events]}


#: A relay's webhook body: a JSON object, of whatever fields the relay sends (their own
#: documents, versioned by them); one that carries no bounce or complaint is ignored
#: (200, nothing recorded), so the relay does not retry it.
_RELAY_BODY: dict[str, Any] = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"type": "object"}}}}}


async def _object(request: Request) -> bytes:
    """The body, once it is known to be a JSON object (SNS posts it as text/plain)."""
    body = await request.body()
    try:
        doc = json.loads(body)
    except ValueError:
        raise ValidationError("body", "must be a JSON object") from None
    if not isinstance(doc, dict):
        raise ValidationError("body", "must be a JSON object")
    return body


@router.post("/events/ses", openapi_extra=_RELAY_BODY)
async def ses_notification(request: Request, ctx: Ctx) -> dict[str, Any]:
    """An Amazon SES bounce or complaint notification in its SNS envelope (an SNS HTTPS
    subscription to the SES feedback topic). Hard bounces and complaints suppress the
    address; soft bounces are counted; other notifications are taken and ignored. With
    TIDINGS_SNS_VERIFY (the default) the SNS signature must hold (403 if not), and a
    SubscriptionConfirmation is confirmed by the node itself; without it a bare
    notification is taken too, and a SubscriptionConfirmation's SubscribeURL is answered
    back for its operator to follow."""
    body = await _object(request)
    doc = json.loads(body)
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


@router.post("/events/postmark", openapi_extra=_RELAY_BODY)
async def postmark_webhook(request: Request, ctx: Ctx) -> dict[str, Any]:
    """A Postmark bounce or spam-complaint webhook (any other is taken and ignored)."""
    return await _record(ctx, parse_postmark(await _object(request)))


@router.get("/events")
async def list_events(ctx: Ctx, address: Text | None = None, delivery_id: Text | None = None,
                      limit: PageOf1000 = 50,
                      next_token: str | None = None) -> dict[str, Any]:
    """Bounces and complaints, newest first, with the delivery each was matched to."""
    rows, token = await ctx.bridge.run(lambda: ctx.t.email.returns.events(
        address=address, delivery_id=delivery_id, limit=limit, next_token=next_token))
    return {"events": [event_json(e) for e in rows], "next_token": token}
