"""JSON shapes of contact lists, contacts and returned-mail events, shared by the native
API and the CLI's `--json` (free of FastAPI, so the CLI does not import it). The native
API speaks snake_case; `topics_in` turns its topics into SES's shape, which the service
validates."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidings.clock import iso
from tidings.model.contacts import Contact, ContactList
from tidings.model.email_events import EmailEvent


def contact_list_json(c: ContactList) -> dict[str, Any]:
    return {"name": c.name, "description": c.description,
            "topics": [{"name": t.name, "display_name": t.display_name,
                        "description": t.description, "default": t.default.value}
                       for t in c.topics],
            "created_at": iso(c.created_at), "updated_at": iso(c.updated_at)}


def contact_json(c: Contact) -> dict[str, Any]:
    return {"list": c.list_name, "address": c.address,
            "topics": {k: v.value for k, v in sorted(c.preferences.items())},
            "unsubscribe_all": c.unsubscribe_all, "attributes": c.attributes,
            "created_at": iso(c.created_at), "updated_at": iso(c.updated_at)}


def event_json(e: EmailEvent) -> dict[str, Any]:
    return {"address": e.address, "kind": e.kind.value, "source": e.source,
            "detail": e.detail, "delivery_id": e.delivery_id, "at": iso(e.created_at)}


def topics_in(topics: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Native topics ({name, display_name, description, default}) in SES's shape."""
    if topics is None:
        return None
    return [{"TopicName": t.get("name"), "DisplayName": t.get("display_name") or t.get("name"),
             "Description": t.get("description") or "",
             "DefaultSubscriptionStatus": t.get("default") or "OPT_IN"} for t in topics]


def preferences_in(topics: Mapping[str, str] | None) -> list[dict[str, Any]] | None:
    """Native preferences ({topic: OPT_IN | OPT_OUT}) in SES's shape."""
    if topics is None:
        return None
    return [{"TopicName": k, "SubscriptionStatus": v} for k, v in topics.items()]
