"""What comes back after a send: bounces and complaints, from a DSN (RFC 3464), an ARF
report (RFC 5965) or a relay's webhook. A hard bounce and a complaint put the address on
the account suppression list (SES does the same); a soft bounce is only counted."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class EventKind(StrEnum):
    HARD_BOUNCE = "HARD_BOUNCE"  # permanent: 5.x.x, the address does not take mail
    SOFT_BOUNCE = "SOFT_BOUNCE"  # transient: 4.x.x, a full mailbox, a greylist
    COMPLAINT = "COMPLAINT"  # the recipient marked the message as spam

    @property
    def suppresses(self) -> bool:
        return self is not EventKind.SOFT_BOUNCE


@dataclass(frozen=True)
class EmailEvent:
    address: str  # normalised
    kind: EventKind
    source: str  # dsn, arf, ses, postmark
    detail: str  # the status and diagnostic, or the feedback type
    created_at: int
    delivery_id: str | None = None  # the delivery it is about, when it could be matched
    seq: int = 0
