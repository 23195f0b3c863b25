"""Contact lists and contacts (`t.email.contacts`): the SES v2 list-management operations,
the opt-outs an unsubscribe records, and the check a send to a list makes per recipient.

Every face (the SES v2 API, the native API, the CLI, the console) calls these methods,
which validate SES's shapes and raise `ContactListNotFound` / `ContactNotFound` (404,
NotFoundException), `ConflictError` (AlreadyExistsException) or `ValidationError`
(BadRequestException).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tidings.clock import Clock
from tidings.email.suppression import suppression_key
from tidings.errors import ConflictError, TidingsError, ValidationError
from tidings.model.contacts import (
    MAX_ATTRIBUTES,
    Contact,
    ContactList,
    ContactListNotFound,
    ContactNotFound,
    SubscriptionStatus,
    check_description,
    check_name,
    check_preferences,
    check_topics,
    split_list_id,
    status_for,
    subscription_status,
    why_not_sent,
)
from tidings.model.paging import page_after, page_token
from tidings.model.queues import check_range
from tidings.store.base import ContactStore

_SCAN = 1000  # contacts read per store trip when a filter skips some


@dataclass(frozen=True)
class ContactFilter:
    """ListContacts' Filter: contacts whose status is `status`, for `topic` when given
    (with `use_default`, a contact without a preference counts with the topic's default),
    else for the whole list (OPT_OUT: UnsubscribeAll)."""

    status: SubscriptionStatus | None = None
    topic: str | None = None
    use_default: bool = False

    @classmethod
    def from_json(cls, doc: Any) -> ContactFilter:
        if doc is None:
            return cls()
        if not isinstance(doc, Mapping):
            raise ValidationError("Filter", "must be {FilteredStatus, TopicFilter}")
        raw = doc.get("FilteredStatus")
        status = None if raw is None else subscription_status("Filter.FilteredStatus", raw)
        topic_filter = doc.get("TopicFilter") or {}
        if not isinstance(topic_filter, Mapping):
            raise ValidationError("Filter.TopicFilter",
                                  "must be {TopicName, UseDefaultIfPreferenceUnavailable}")
        topic = topic_filter.get("TopicName")
        if topic is not None:
            check_name("Filter.TopicFilter.TopicName", topic)
        return cls(status, topic, bool(topic_filter.get("UseDefaultIfPreferenceUnavailable")))

    def matches(self, contact_list: ContactList, contact: Contact) -> bool:
        if self.status is None:
            return self.topic is None or self.topic in contact.preferences or self.use_default
        if self.topic is None:
            opted_out = contact.unsubscribe_all
            return opted_out == (self.status is SubscriptionStatus.OPT_OUT)
        if contact.unsubscribe_all:
            return self.status is SubscriptionStatus.OPT_OUT
        return status_for(contact_list, contact, self.topic, self.use_default) is self.status


def _attributes(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_ATTRIBUTES:
        raise ValidationError("AttributesData",
                              f"must be JSON text of at most {MAX_ATTRIBUTES} characters")
    try:
        if not isinstance(json.loads(value), dict):
            raise ValueError
    except ValueError:
        raise ValidationError("AttributesData", "must be a JSON object") from None
    return value


class ContactLists:
    def __init__(self, store: ContactStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    # lists -------------------------------------------------------------------------------

    def create_list(self, name: str, topics: object = None,
                    description: object = None) -> ContactList:
        now = self.clock.now_ms()
        row = ContactList(check_name("ContactListName", name), check_topics(topics),
                          check_description(description), now, now)
        if not self.store.create_contact_list(row):
            raise ConflictError(f"List with name {name} already exists.")
        return row

    def get_list(self, name: str) -> ContactList:
        found = self.store.get_contact_list(name)
        if found is None:
            raise ContactListNotFound(name)
        return found

    def update_list(self, name: str, topics: object = None,
                    description: object = None) -> ContactList:
        """Replace the topics and description (SES UpdateContactList). Preferences for a
        topic that is gone stay on the contacts and no longer count."""
        current = self.get_list(name)
        row = replace(current, topics=check_topics(topics),
                      description=check_description(description),
                      updated_at=max(self.clock.now_ms(), current.updated_at))
        if not self.store.update_contact_list(row):
            raise ContactListNotFound(name)
        return row

    def delete_list(self, name: str) -> None:
        if not self.store.delete_contact_list(name):
            raise ContactListNotFound(name)

    def lists(self, *, limit: int = 100, next_token: str | None = None,
              ) -> tuple[list[ContactList], str | None]:
        check_range("PageSize", limit, 1, 1000)
        rows = self.store.list_contact_lists(page_after(next_token), limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return rows, (page_token(rows[-1].name) if more else None)

    # contacts ----------------------------------------------------------------------------

    def create_contact(self, list_name: str, address: str, preferences: object = None,
                       unsubscribe_all: object = False, attributes: object = None) -> Contact:
        found = self.get_list(list_name)
        now = self.clock.now_ms()
        contact = Contact(list_name, suppression_key(address),
                          check_preferences(preferences, found), bool(unsubscribe_all),
                          _attributes(attributes), now, now)
        if not self.store.create_contact(contact):
            raise ConflictError(f"Contact already exists in list {list_name}.")
        return contact

    def get_contact(self, list_name: str, address: str) -> Contact:
        self.get_list(list_name)
        found = self.store.get_contact(list_name, suppression_key(address))
        if found is None:
            raise ContactNotFound(address)
        return found

    def update_contact(self, list_name: str, address: str, preferences: object = None,
                       unsubscribe_all: object = None, attributes: object = None) -> Contact:
        """SES UpdateContact: the given TopicPreferences replace the contact's; an omitted
        UnsubscribeAll or AttributesData keeps what it was."""
        found = self.get_list(list_name)
        current = self.get_contact(list_name, address)
        contact = replace(
            current, preferences=check_preferences(preferences, found),
            unsubscribe_all=current.unsubscribe_all if unsubscribe_all is None
            else bool(unsubscribe_all),
            attributes=current.attributes if attributes is None else _attributes(attributes),
            updated_at=max(self.clock.now_ms(), current.updated_at))
        if not self.store.update_contact(contact):
            raise ContactNotFound(address)
        return contact

    def delete_contact(self, list_name: str, address: str) -> None:
        self.get_list(list_name)
        if not self.store.delete_contact(list_name, suppression_key(address)):
            raise ContactNotFound(address)

    def contacts(self, list_name: str, *, where: ContactFilter | None = None,
                 limit: int = 100, next_token: str | None = None,
                 ) -> tuple[list[Contact], str | None]:
        check_range("PageSize", limit, 1, 1000)
        found = self.get_list(list_name)
        where = where or ContactFilter()
        if where.topic is not None and found.topic(where.topic) is None:
            raise ValidationError("Filter.TopicFilter.TopicName",
                                  f"{where.topic!r} is not a topic of the list {list_name}")
        after = page_after(next_token)
        out: list[Contact] = []
        while len(out) <= limit:
            batch = self.store.list_contacts(list_name, after, _SCAN)
            out.extend(c for c in batch if where.matches(found, c))
            if len(batch) < _SCAN:
                break
            after = batch[-1].address
        more = len(out) > limit
        out = out[:limit]
        return out, (page_token(out[-1].address) if more else None)

    # sends and unsubscribes --------------------------------------------------------------

    def check_send(self, list_id: str) -> None:
        """A send naming a list must name one that exists, and a topic of it (as SES
        refuses SendEmail otherwise): checked when the send is accepted and again when
        it is delivered."""
        name, topic = split_list_id(list_id)
        found = self.get_list(name)
        if topic is not None and found.topic(topic) is None:
            raise ValidationError("ListManagementOptions.TopicName",
                                  f"{topic!r} is not a topic of the contact list {name}")

    def skipped(self, sends: Sequence[tuple[str | None, Sequence[str]]],
                ) -> list[dict[str, str] | TidingsError]:
        """For each send (its list id, its normalised recipients): the recipients it skips,
        with why; or the error when its list or topic is gone. One read per list named,
        however many sends name it (a campaign's deliveries come in batches)."""
        wanted: dict[str, set[str]] = {}
        for list_id, addresses in sends:
            if list_id is not None:
                wanted.setdefault(split_list_id(list_id)[0], set()).update(addresses)
        lists = {name: self.store.get_contact_list(name) for name in wanted}
        contacts = {name: self.store.contacts_among(name, sorted(addresses))
                    for name, addresses in wanted.items() if lists[name] is not None}
        out: list[dict[str, str] | TidingsError] = []
        for list_id, addresses in sends:
            if list_id is None:
                out.append({})  # transactional: only the suppression list stops it
                continue
            name, topic = split_list_id(list_id)
            found = lists[name]
            if found is None or (topic is not None and found.topic(topic) is None):
                out.append(ValidationError("ListManagementOptions", f"the contact list or "
                                           f"topic {list_id} no longer exists"))
                continue
            mine = contacts[name]
            out.append({a: why for a in addresses
                        if (why := why_not_sent(found, topic, mine.get(a))) is not None})
        return out

    def label(self, list_id: str) -> str:
        """What the unsubscribe page calls the mail: the topic's display name, or the
        list's name."""
        name, topic = split_list_id(list_id)
        found = self.store.get_contact_list(name)
        shown = found.topic(topic) if found is not None and topic is not None else None
        return f"{shown.display_name} email" if shown is not None else f"{name} email"

    def opt_out(self, list_id: str, address: str) -> bool:
        """What an unsubscribe from list mail does: the contact (made if it is not one
        yet) opts out of the topic, or of the whole list when the mail named no topic.
        False when the list no longer exists (nothing left to opt out of)."""
        name, topic = split_list_id(list_id)
        found = self.store.get_contact_list(name)
        if found is None:
            return False
        key = suppression_key(address)
        now = self.clock.now_ms()
        current = self.store.get_contact(name, key) or Contact(name, key, created_at=now)
        if topic is not None and found.topic(topic) is not None:
            contact = replace(current, preferences={**current.preferences,
                                                    topic: SubscriptionStatus.OPT_OUT},
                              updated_at=now)
        else:
            contact = replace(current, unsubscribe_all=True, updated_at=now)
        self.store.put_contact(contact)
        return True
