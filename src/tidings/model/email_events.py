"""What comes back after a send: bounces and complaints, from a DSN (RFC 3464), an ARF
report (RFC 5965) or a relay's webhook. A hard bounce and a complaint put the address on
the account suppression list (SES does the same); a soft bounce is counted, and enough of
them within a window (`SoftBounceRule`) suppress the address too."""

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


@dataclass(frozen=True)
class SoftBounceRule:
    """`count` soft bounces of one address at or after `since` (epoch ms) suppress it
    (reason BOUNCE): a mailbox full for a week is as dead to a sender as a hard bounce
    (TIDINGS_EMAIL_SOFT_BOUNCES in TIDINGS_EMAIL_SOFT_BOUNCE_DAYS). `count` 0: never."""

    count: int
    since: int
