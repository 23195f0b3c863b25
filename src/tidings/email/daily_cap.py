"""The per-recipient frequency cap (TIDINGS_EMAIL_DAILY_CAP): which list mail of a batch
would exceed it, counted from the delivery log in one store trip for the whole batch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tidings.email.deliverability import local_midnight_ms, recipient_zone
from tidings.email.sesv2 import RawEmailMessage
from tidings.model.email import EmailMessage, Suppression, normalise_address
from tidings.store.base import EmailStore


def over_daily_cap(store: EmailStore, now: int, messages: Sequence[EmailMessage],
                   suppressed: Mapping[str, Suppression], cap: int) -> set[tuple[int, str]]:
    """(id(message), address) of the list mail over the daily `cap` (the sending
    node's TIDINGS_EMAIL_DAILY_CAP) today in the recipient's zone; the messages of
    one batch count towards each other's cap."""
    if cap <= 0:
        return set()
    wanted: list[tuple[int, str, int]] = []
    for msg in messages:
        if not msg.carries_unsubscribe or isinstance(msg, RawEmailMessage):
            continue
        since = local_midnight_ms(now, recipient_zone(msg.template_data))
        wanted += [(id(msg), k, since) for k in map(normalise_address, msg.recipients)
                   if k not in suppressed]
    counts = store.sent_to_since([(k, since) for _, k, since in wanted])
    tally: dict[str, int] = {}
    over: set[tuple[int, str]] = set()
    for (ident, key, _), sent in zip(wanted, counts, strict=True):
        so_far = sent + tally.get(key, 0)
        if so_far >= cap:
            over.add((ident, key))
        else:
            tally[key] = tally.get(key, 0) + 1
    return over
