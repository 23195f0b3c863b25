"""Returned mail recorded (`t.email.returns`): each bounce or complaint, however it came
(the inbound SMTP listener, a relay's webhook), is matched to its delivery and logged as
an event; hard bounces and complaints put the address on the account suppression list
(reasons BOUNCE and COMPLAINT), as SES does, in the same transaction; soft bounces are
counted, and `soft_bounces` of them within `soft_bounce_days` suppress too (reason BOUNCE).
Each event matched to a delivery joins its detail (the log and the console show it), and a
hard bounce turns a SENT delivery BOUNCED. Contact-list opt-outs are a different thing
(`contacts.py`): a complaint stops all mail to the address, not one topic."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from tidings.clock import Clock
from tidings.email.returns import Returned
from tidings.errors import ValidationError
from tidings.model.email_events import EmailEvent, SoftBounceRule
from tidings.model.paging import page_after, page_token
from tidings.model.queues import check_range
from tidings.store.base import ContactStore, DeliveryQuery, EmailStore

log = logging.getLogger("tidings.email.returns")


class ReturnedMailStore(EmailStore, ContactStore, Protocol):
    """What this module asks of the store: the delivery log and the events recorded
    against it."""


class ReturnedMail:
    def __init__(self, store: ReturnedMailStore, clock: Clock, *, soft_bounces: int = 3,
                 soft_bounce_days: float = 7.0) -> None:
        self.store = store
        self.clock = clock
        self.soft_limit = soft_bounces
        self.soft_window_ms = int(soft_bounce_days * 86_400_000)

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
            counted = self.store.record_email_events(
                events, now, SoftBounceRule(self.soft_limit, now - self.soft_window_ms))
            for address in counted:
                log.info("%s soft-bounced %d times in %g days: on the suppression list",
                         address, self.soft_limit, self.soft_window_ms / 86_400_000)
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
