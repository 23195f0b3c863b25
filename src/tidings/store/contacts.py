"""Contact lists, contacts and returned-mail events: the `ContactStore` part of `SqlStore`.
Topics and preferences are stored as JSON text, in SES's own shapes, on both backends."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tidings.model.contacts import Contact, ContactList, SubscriptionStatus, Topic
from tidings.model.email import SuppressionReason
from tidings.model.email_events import EmailEvent, EventKind, SoftBounceRule
from tidings.model.states import DELIVERIES, DeliveryState
from tidings.store.sqlbase import SqlBase

NO_SEQ = 2**62


def _list(row: Any) -> ContactList:
    name, description, topics, created_at, updated_at = row
    return ContactList(name, tuple(Topic.from_json(t) for t in json.loads(topics)),
                       description, created_at, updated_at)


def _contact(row: Any) -> Contact:
    list_name, address, prefs, unsubscribe_all, attributes, created_at, updated_at = row
    return Contact(list_name, address,
                   {k: SubscriptionStatus(v) for k, v in json.loads(prefs).items()},
                   bool(unsubscribe_all), attributes, created_at, updated_at)


def _event(row: Any) -> EmailEvent:
    seq, delivery_id, address, kind, source, detail, created_at = row
    return EmailEvent(address, EventKind(kind), source, detail, created_at, delivery_id, seq)


def _topics(c: ContactList) -> str:
    return json.dumps([t.to_json() for t in c.topics])


def _prefs(c: Contact) -> str:
    return json.dumps({k: v.value for k, v in c.preferences.items()})


class SqlContacts(SqlBase):
    def create_contact_list(self, contact_list: ContactList) -> bool:
        c = contact_list
        with self.driver.auto() as conn:
            return bool(conn.execute(self.q["insert_contact_list"], (
                c.name, c.description, _topics(c), c.created_at, c.updated_at)).rowcount > 0)

    def get_contact_list(self, name: str) -> ContactList | None:
        row = self._one("contact_list_by_name", (name,))
        return None if row is None else _list(row)

    def list_contact_lists(self, after: str | None, limit: int) -> list[ContactList]:
        return [_list(r) for r in self._all("list_contact_lists", (after or "", limit))]

    def update_contact_list(self, contact_list: ContactList) -> bool:
        c = contact_list
        with self.driver.auto() as conn:
            return bool(conn.execute(self.q["update_contact_list"], (
                c.description, _topics(c), c.updated_at, c.name)).rowcount > 0)

    def delete_contact_list(self, name: str) -> bool:
        with self.driver.tx() as conn:
            conn.execute(self.q["delete_list_contacts"], (name,))
            return bool(conn.execute(self.q["delete_contact_list"], (name,)).rowcount > 0)

    def create_contact(self, contact: Contact) -> bool:
        c = contact
        with self.driver.auto() as conn:
            return bool(conn.execute(self.q["insert_contact"], (
                c.list_name, c.address, _prefs(c), c.unsubscribe_all, c.attributes,
                c.created_at, c.updated_at)).rowcount > 0)

    def update_contact(self, contact: Contact) -> bool:
        c = contact
        with self.driver.auto() as conn:
            return bool(conn.execute(self.q["update_contact"], (
                _prefs(c), c.unsubscribe_all, c.attributes, c.updated_at, c.list_name,
                c.address)).rowcount > 0)

    def put_contact(self, contact: Contact) -> None:
        c = contact
        with self.driver.tx() as conn:
            if conn.execute(self.q["update_contact"], (
                    _prefs(c), c.unsubscribe_all, c.attributes, c.updated_at, c.list_name,
                    c.address)).rowcount == 0:
                conn.execute(self.q["insert_contact"], (
                    c.list_name, c.address, _prefs(c), c.unsubscribe_all, c.attributes,
                    c.created_at, c.updated_at))

    def get_contact(self, list_name: str, address: str) -> Contact | None:
        row = self._one("contact_by_key", (list_name, address))
        return None if row is None else _contact(row)

    def contacts_among(self, list_name: str, addresses: Sequence[str]) -> dict[str, Contact]:
        if not addresses:
            return {}
        found = self._all("contacts_among", (list_name, self.driver.array(addresses)))
        return {c.address: c for c in map(_contact, found)}

    def list_contacts(self, list_name: str, after: str | None, limit: int) -> list[Contact]:
        return [_contact(r) for r in self._all("list_contacts",
                                               (list_name, after or "", limit))]

    def delete_contact(self, list_name: str, address: str) -> bool:
        with self.driver.auto() as conn:
            return bool(conn.execute(self.q["delete_contact"],
                                     (list_name, address)).rowcount > 0)

    def record_email_events(self, events: Sequence[EmailEvent], now: int,
                            soft: SoftBounceRule | None = None) -> list[str]:
        DELIVERIES.check(DeliveryState.SENT, DeliveryState.BOUNCED)
        with self.driver.tx() as conn:
            for e in events:
                conn.execute(self.q["insert_email_event"], (
                    e.delivery_id, e.address, e.kind.value, e.source, e.detail, e.created_at))
                if e.delivery_id is None:
                    continue
                conn.execute(self.q["append_delivery_detail"], (
                    f"{e.kind.value} ({e.source}) {e.address}: {e.detail}", now,
                    e.delivery_id))
                if e.kind is EventKind.HARD_BOUNCE:  # the compare-and-set checked above
                    conn.execute(self.q["move_delivery_state"], (
                        DeliveryState.BOUNCED.value, now, e.delivery_id,
                        DeliveryState.SENT.value))
            for kind, reason in ((EventKind.HARD_BOUNCE, SuppressionReason.BOUNCE),
                                 (EventKind.COMPLAINT, SuppressionReason.COMPLAINT)):
                rows = [(e.address, reason.value, now) for e in events if e.kind is kind]
                self.driver.run_each(conn, "put_suppression", rows)
            counted: list[str] = []
            if soft is not None and soft.count > 0:
                for address in sorted({e.address for e in events
                                       if e.kind is EventKind.SOFT_BOUNCE}):
                    (n,) = conn.execute(self.q["soft_bounces_since"],
                                        (address, soft.since)).fetchone()
                    if int(n) >= soft.count:
                        counted.append(address)
                self.driver.run_each(conn, "put_suppression", [
                    (a, SuppressionReason.BOUNCE.value, now) for a in counted])
        return counted

    def list_email_events(self, delivery_id: str | None, address: str | None,
                          before: int | None, limit: int) -> list[EmailEvent]:
        return [_event(r) for r in self._all("list_email_events", {
            "before": NO_SEQ if before is None else before, "delivery_id": delivery_id,
            "address": address, "limit": limit})]

    def soft_bounce_count(self, address: str) -> int:
        row = self._one("soft_bounce_count", (address,))
        return int(row[0]) if row else 0
