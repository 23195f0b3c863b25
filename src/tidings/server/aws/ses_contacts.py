"""SES v2 list management (`/v2/email/contact-lists`): CreateContactList, GetContactList,
ListContactLists, UpdateContactList, DeleteContactList, CreateContact, GetContact,
UpdateContact, ListContacts (with its Filter) and DeleteContact, in botocore's shapes.
Tags are accepted and not kept. Every call goes to `t.email.contacts`."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from tidings.email.contacts import ContactFilter, ContactLists
from tidings.errors import ValidationError
from tidings.model.contacts import Contact, ContactList, SubscriptionStatus
from tidings.model.queues import check_range
from tidings.runtime.bridge import Bridge
from tidings.server.aws.ses_shapes import seconds

Doc = dict[str, Any]


def _preferences(contact_list: ContactList | None, c: Contact) -> Doc:
    out: Doc = {"EmailAddress": c.address, "UnsubscribeAll": c.unsubscribe_all,
                "TopicPreferences": [{"TopicName": k, "SubscriptionStatus": v.value}
                                     for k, v in sorted(c.preferences.items())],
                "LastUpdatedTimestamp": seconds(c.updated_at)}
    if contact_list is not None:  # the defaults of the topics it has no preference for
        out["TopicDefaultPreferences"] = [
            {"TopicName": t.name, "SubscriptionStatus": SubscriptionStatus(t.default).value}
            for t in contact_list.topics if t.name not in c.preferences]
    return out


def _page_size(raw: object, most: int = 1000) -> int:
    return 100 if raw is None else check_range("PageSize", raw, 1, most)


class ContactApi:
    def __init__(self, contacts: ContactLists, bridge: Bridge) -> None:
        self.contacts = contacts
        self.bridge = bridge

    def table(self) -> list[tuple[str, str, Any]]:
        """(path, method, operation) of every list-management operation."""
        lists = "/v2/email/contact-lists"
        one, contacts = lists + "/{ContactListName}", lists + "/{ContactListName}/contacts"
        return [(lists, "POST", self.create_contact_list), (lists, "GET", self.list_contact_lists),
                (one, "GET", self.get_contact_list), (one, "PUT", self.update_contact_list),
                (one, "DELETE", self.delete_contact_list),
                (contacts, "POST", self.create_contact),
                (contacts + "/list", "POST", self.list_contacts),
                (contacts + "/{EmailAddress}", "GET", self.get_contact),
                (contacts + "/{EmailAddress}", "PUT", self.update_contact),
                (contacts + "/{EmailAddress}", "DELETE", self.delete_contact)]

    async def create_contact_list(self, _request: Request, body: Doc) -> Doc:
        name = body.get("ContactListName")
        if not isinstance(name, str):
            raise ValidationError("ContactListName", "is required")
        await self.bridge.run(self.contacts.create_list, name, body.get("Topics"),
                              body.get("Description"))
        return {}

    async def get_contact_list(self, request: Request, _body: Doc) -> Doc:
        c: ContactList = await self.bridge.run(self.contacts.get_list,
                                               request.path_params["ContactListName"])
        return {"ContactListName": c.name, "Topics": [t.to_json() for t in c.topics],
                "Description": c.description, "CreatedTimestamp": seconds(c.created_at),
                "LastUpdatedTimestamp": seconds(c.updated_at), "Tags": []}

    async def list_contact_lists(self, request: Request, _body: Doc) -> Doc:
        q = request.query_params
        rows, token = await self.bridge.run(
            lambda: self.contacts.lists(limit=_page_size(q.get("PageSize")),
                                        next_token=q.get("NextToken") or None))
        out: Doc = {"ContactLists": [{"ContactListName": c.name,
                                      "LastUpdatedTimestamp": seconds(c.updated_at)}
                                     for c in rows]}
        if token:
            out["NextToken"] = token
        return out

    async def update_contact_list(self, request: Request, body: Doc) -> Doc:
        await self.bridge.run(self.contacts.update_list, request.path_params["ContactListName"],
                              body.get("Topics"), body.get("Description"))
        return {}

    async def delete_contact_list(self, request: Request, _body: Doc) -> Doc:
        await self.bridge.run(self.contacts.delete_list, request.path_params["ContactListName"])
        return {}

    async def create_contact(self, request: Request, body: Doc) -> Doc:
        address = body.get("EmailAddress")
        if not isinstance(address, str):
            raise ValidationError("EmailAddress", "is required")
        await self.bridge.run(self.contacts.create_contact,
                              request.path_params["ContactListName"], address,
                              body.get("TopicPreferences"), body.get("UnsubscribeAll", False),
                              body.get("AttributesData"))
        return {}

    async def get_contact(self, request: Request, _body: Doc) -> Doc:
        name, address = (request.path_params["ContactListName"],
                         request.path_params["EmailAddress"])

        def read() -> tuple[ContactList, Contact]:
            return self.contacts.get_list(name), self.contacts.get_contact(name, address)

        found, c = await self.bridge.run(read)
        out = {"ContactListName": name, **_preferences(found, c),
               "CreatedTimestamp": seconds(c.created_at)}
        if c.attributes is not None:
            out["AttributesData"] = c.attributes
        return out

    async def update_contact(self, request: Request, body: Doc) -> Doc:
        await self.bridge.run(self.contacts.update_contact,
                              request.path_params["ContactListName"],
                              request.path_params["EmailAddress"], body.get("TopicPreferences"),
                              body.get("UnsubscribeAll"), body.get("AttributesData"))
        return {}

    async def list_contacts(self, request: Request, body: Doc) -> Doc:
        name = request.path_params["ContactListName"]
        where = ContactFilter.from_json(body.get("Filter"))
        limit = _page_size(body.get("PageSize"))
        token = body.get("NextToken")
        if token is not None and not isinstance(token, str):
            raise ValidationError("NextToken", "must be a string")

        def read() -> tuple[ContactList, list[Contact], str | None]:
            rows, nxt = self.contacts.contacts(name, where=where, limit=limit,
                                               next_token=token or None)
            return self.contacts.get_list(name), rows, nxt

        found, rows, nxt = await self.bridge.run(read)
        out: Doc = {"Contacts": [_preferences(found, c) for c in rows]}
        if nxt:
            out["NextToken"] = nxt
        return out

    async def delete_contact(self, request: Request, _body: Doc) -> Doc:
        await self.bridge.run(self.contacts.delete_contact,
                              request.path_params["ContactListName"],
                              request.path_params["EmailAddress"])
        return {}
