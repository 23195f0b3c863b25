"""Returned mail recorded (`t.email.returns`): each bounce or complaint, however it came
(the inbound SMTP listener, a relay's webhook), is matched to its delivery and logged as
an event; hard bounces and complaints put the address on the account suppression list
(reasons BOUNCE and COMPLAINT), as SES does, in the same transaction; soft bounces are only
counted. Contact-list opt-outs are a different thing (`contacts.py`): a complaint stops
all mail to the address, not one topic."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tidings.clock import Clock
from tidings.email.returns import Returned
from tidings.errors import ValidationError
from tidings.model.email_events import EmailEvent
from tidings.model.paging import page_after, page_token
from tidings.model.queues import check_range
from tidings.store.base import ContactStore, DeliveryQuery, EmailStore


class ReturnedMailStore(EmailStore, ContactStore, Protocol):
    """What this module asks of the store: the delivery log and the events recorded
    against it."""


class ReturnedMail:
    def __init__(self, store: ReturnedMailStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def _delivery_id(self, r: Returned) -> str | None:
        """The VERP id when it names a delivery; else the delivery whose Message-ID the
        report quotes (the log keeps it; for mail tidings rendered it is `<id>@domain`)."""
        for candidate in (r.delivery_id, (r.message_id or "").partition("@")[0] or None):
            if candidate and self.store.get_delivery(candidate) is not None:
                return candidate
        if r.message_id:
            found = self.store.find_deliveries(DeliveryQuery(message_id=r.message_id), 0, 1)
            if found:
                return found[0].id
        return None

    def record(self, returned: Sequence[Returned]) -> list[EmailEvent]:
        """Log each as an event of its delivery (when one matches) and suppress what
        must be; one transaction."""
        now = self.clock.now_ms()
        events = [EmailEvent(r.address, r.kind, r.source, r.detail, now, self._delivery_id(r))
                  for r in returned]
        if events:
            self.store.record_email_events(events, now)
        return events

    def events(self, *, address: str | None = None, delivery_id: str | None = None,
               limit: int = 50, next_token: str | None = None,
               ) -> tuple[list[EmailEvent], str | None]:
        """Newest first."""
        check_range("limit", limit, 1, 1000)
        before = None
        if (after := page_after(next_token)) is not None:
            if not after.isdigit():
                raise ValidationError("NextToken", "is not a token this API returned")
            before = int(after)
        rows = self.store.list_email_events(delivery_id, address.strip().lower()
                                            if address else None, before, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return rows, (page_token(str(rows[-1].seq)) if more else None)

    def soft_bounces(self, address: str) -> int:
        return self.store.soft_bounce_count(address.strip().lower())
