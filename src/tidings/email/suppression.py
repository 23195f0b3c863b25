"""The account-level suppression list: addresses tidings will not send to.

As in SES, suppression is per account, not per list: a bounce or a complaint (or an
operator) stops every later message to the address, transactional mail included, and a
suppressed recipient is dropped from a message before it is sent (the others still get
it). An unsubscribe from list mail is not suppression: it opts the contact out of that
list or topic (`contacts.py`); only mail that named no contact list falls back to it.
Addresses are keyed lower-cased and trimmed: `Ana@Example.com` and `ana@example.com` are
one entry. The first reason stays: adding an address again keeps when and why it was
first suppressed.
"""

from __future__ import annotations

from tidings.errors import ValidationError
from tidings.model.email import (
    Suppression,
    SuppressionReason,
    bare_address,
    check_address,
    normalise_address,
)

__all__ = ["Suppression", "SuppressionReason", "reason_of", "suppression_key"]


def suppression_key(value: str) -> str:
    """Validate an address (display names allowed) and return its suppression-list key."""
    return normalise_address(bare_address(check_address("EmailAddress", value)))


def reason_of(value: str) -> SuppressionReason:
    try:
        return SuppressionReason(value.upper())
    except ValueError:
        raise ValidationError("Reason", "must be BOUNCE, COMPLAINT, UNSUBSCRIBE or MANUAL")\
            from None
