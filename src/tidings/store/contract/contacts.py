"""Contact lists, contacts and returned-mail events: what `tidings.email.contacts` and
`tidings.email.returns` ask of the store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tidings.model.contacts import Contact, ContactList
from tidings.model.email_events import EmailEvent, SoftBounceRule


class ContactStore(Protocol):
    def create_contact_list(self, contact_list: ContactList) -> bool:
        """False when the name is taken (the existing list is left as it is)."""
        ...

    def get_contact_list(self, name: str) -> ContactList | None: ...
    def list_contact_lists(self, after: str | None, limit: int) -> list[ContactList]: ...
    def update_contact_list(self, contact_list: ContactList) -> bool: ...

    def delete_contact_list(self, name: str) -> bool:
        """The list and its contacts, in one transaction; False when there was none."""
        ...

    def create_contact(self, contact: Contact) -> bool:
        """False when the address is already a contact of the list."""
        ...

    def update_contact(self, contact: Contact) -> bool: ...

    def put_contact(self, contact: Contact) -> None:
        """Insert, or replace the existing contact's preferences (an unsubscribe of an
        address that was not a contact yet makes it one)."""
        ...

    def get_contact(self, list_name: str, address: str) -> Contact | None: ...
    def contacts_among(self, list_name: str, addresses: Sequence[str]) -> dict[str, Contact]: ...
    def list_contacts(self, list_name: str, after: str | None, limit: int) -> list[Contact]: ...
    def delete_contact(self, list_name: str, address: str) -> bool: ...

    def record_email_events(self, events: Sequence[EmailEvent], now: int,
                            soft: SoftBounceRule | None = None) -> list[str]:
        """Log the events and suppress the addresses of those that suppress (reason
        BOUNCE or COMPLAINT; an address already listed keeps its first reason), and of
        those whose soft bounces reached `soft` (reason BOUNCE); one transaction. Each
        event matched to a delivery is appended to its detail, and a hard bounce moves a
        SENT delivery to BOUNCED (`DELIVERIES`). Returns the addresses the soft-bounce
        count suppressed."""
        ...

    def list_email_events(self, delivery_id: str | None, address: str | None,
                          before: int | None, limit: int) -> list[EmailEvent]:
        """Newest first; `before` is the `seq` of the previous page's last row."""
        ...

    def soft_bounce_count(self, address: str) -> int: ...

