"""Contact lists, topics and contacts (the SES v2 list-management shapes), and the one rule
that says whether a contact gets a send to a list or topic.

A contact list holds topics (each with a default subscription status) and contacts (an
address, its explicit topic preferences, and `unsubscribe_all`). A send that names a list
(`ListManagementOptions`) goes to a recipient unless that recipient unsubscribed from the
whole list, or its preference for the named topic is OPT_OUT; a recipient with no explicit
preference for the topic (including an address that is not a contact) gets the topic's
default. That is the difference from the account suppression list: an unsubscribe opts
out of one list or topic, and transactional mail (no `ListManagementOptions`) still goes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tidings.errors import NotFoundError, ValidationError

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_TOPICS = 20  # SES: at most 20 topics per contact list
MAX_DESCRIPTION = 500
MAX_ATTRIBUTES = 1000  # AttributesData: a JSON object's text, SES's limit


class SubscriptionStatus(StrEnum):
    OPT_IN = "OPT_IN"
    OPT_OUT = "OPT_OUT"


class ContactListNotFound(NotFoundError):
    """The contact list does not exist."""

    kind = "contact list"
    wording = "List with name {ident} does not exist."  # SES v2's NotFoundException


class ContactNotFound(NotFoundError):
    """The contact does not exist in the list."""

    kind = "contact"
    wording = "Contact {ident} does not exist."


def check_name(field_name: str, value: object) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ValidationError(field_name, "must be 1-64 characters of letters, digits, "
                                          "'_' and '-'")
    return value


def subscription_status(field_name: str, value: object) -> SubscriptionStatus:
    try:
        return SubscriptionStatus(str(value).upper())
    except ValueError:
        raise ValidationError(field_name, "must be OPT_IN or OPT_OUT") from None


@dataclass(frozen=True)
class Topic:
    name: str
    display_name: str
    default: SubscriptionStatus
    description: str = ""

    def to_json(self) -> dict[str, str]:
        return {"TopicName": self.name, "DisplayName": self.display_name,
                "Description": self.description, "DefaultSubscriptionStatus": self.default}

    @classmethod
    def from_json(cls, doc: Any, where: str = "Topics") -> Topic:
        """A Topic in SES's shape (what the store keeps too)."""
        if not isinstance(doc, Mapping):
            raise ValidationError(where, "each topic is {TopicName, DisplayName, "
                                         "DefaultSubscriptionStatus, Description}")
        display = doc.get("DisplayName")
        if not isinstance(display, str) or not display.strip() or len(display) > 128:
            raise ValidationError(f"{where}.DisplayName", "is required (1-128 characters)")
        description = doc.get("Description") or ""
        if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
            raise ValidationError(f"{where}.Description",
                                  f"must be text of at most {MAX_DESCRIPTION} characters")
        return cls(check_name(f"{where}.TopicName", doc.get("TopicName")), display,
                   subscription_status(f"{where}.DefaultSubscriptionStatus",
                                       doc.get("DefaultSubscriptionStatus")), description)


@dataclass(frozen=True)
class ContactList:
    name: str
    topics: tuple[Topic, ...]
    description: str
    created_at: int
    updated_at: int

    def topic(self, name: str) -> Topic | None:
        return next((t for t in self.topics if t.name == name), None)


def check_topics(items: object) -> tuple[Topic, ...]:
    if items is None:
        return ()
    if not isinstance(items, list) or len(items) > MAX_TOPICS:
        raise ValidationError("Topics", f"must be a list of at most {MAX_TOPICS} topics")
    topics = tuple(Topic.from_json(t) for t in items)
    if len({t.name for t in topics}) != len(topics):
        raise ValidationError("Topics", "each TopicName must appear once")
    return topics


def check_description(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_DESCRIPTION:
        raise ValidationError("Description",
                              f"must be text of at most {MAX_DESCRIPTION} characters")
    return value


@dataclass(frozen=True)
class Contact:
    list_name: str
    address: str  # normalised: trimmed, lower-case
    preferences: Mapping[str, SubscriptionStatus] = field(default_factory=dict)
    unsubscribe_all: bool = False
    attributes: str | None = None  # AttributesData: a JSON object's text, as given
    created_at: int = 0
    updated_at: int = 0


def check_preferences(items: object, contact_list: ContactList,
                      ) -> dict[str, SubscriptionStatus]:
    """TopicPreferences ([{TopicName, SubscriptionStatus}]) against the list's topics."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise ValidationError("TopicPreferences",
                              "must be a list of {TopicName, SubscriptionStatus}")
    out: dict[str, SubscriptionStatus] = {}
    for item in items:
        if not isinstance(item, Mapping):
            raise ValidationError("TopicPreferences",
                                  "each is {TopicName, SubscriptionStatus}")
        name = check_name("TopicPreferences.TopicName", item.get("TopicName"))
        if contact_list.topic(name) is None:
            raise ValidationError("TopicPreferences.TopicName",
                                  f"{name!r} is not a topic of the list {contact_list.name}")
        out[name] = subscription_status("TopicPreferences.SubscriptionStatus",
                                        item.get("SubscriptionStatus"))
    return out


def status_for(contact_list: ContactList, contact: Contact | None, topic: str,
               use_default: bool = True) -> SubscriptionStatus | None:
    """A contact's status for a topic: its explicit preference, else (with `use_default`)
    the topic's default; None when it has neither."""
    if contact is not None and topic in contact.preferences:
        return contact.preferences[topic]
    found = contact_list.topic(topic)
    return found.default if use_default and found is not None else None


def why_not_sent(contact_list: ContactList, topic: str | None,
                 contact: Contact | None) -> str | None:
    """Why a send to this list (and topic) skips this recipient; None when it goes."""
    if contact is not None and contact.unsubscribe_all:
        return f"unsubscribed from the list {contact_list.name}"
    if topic is None:
        return None
    if status_for(contact_list, contact, topic) is SubscriptionStatus.OPT_OUT:
        explicit = contact is not None and topic in contact.preferences
        return (f"opted out of the topic {contact_list.name}/{topic}" if explicit else
                f"not opted in to the topic {contact_list.name}/{topic} (its default is "
                "OPT_OUT)")
    return None


def split_list_id(list_id: str) -> tuple[str, str | None]:
    """("news", "weekly") from a message's `list_id` "news/weekly"; ("news", None)."""
    name, _, topic = list_id.partition("/")
    return name, topic or None
