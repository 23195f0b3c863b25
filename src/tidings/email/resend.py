"""Resending failed deliveries (`tidings email resend`): SES has no such call, and
operators of a relay outage need one. FAILED and RENDERING_FAILURE deliveries matching
every given filter go back in line, each as a job of its own (the first one's job key is
done) for the same delivery; a BOUNCED address is suppressed, so it is not resent. Each
delivery goes back once per call, even with two operators resending at once (the store's
compare-and-set, `resend_deliveries`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import NamedTuple

from tidings.clock import Clock
from tidings.errors import ValidationError
from tidings.model.email import DeliveryState, normalise_address
from tidings.notify.base import queue_channel
from tidings.queues.internal import EMAIL_QUEUE, ensure_internal_queues
from tidings.queues.service import QueueService
from tidings.store.base import DeliveryQuery, EmailStore

RESEND_PAGE = 500
RESENDABLE = (DeliveryState.FAILED, DeliveryState.RENDERING_FAILURE)


def _resendable(state: str) -> DeliveryState:
    for wanted in RESENDABLE:
        if state.upper() == wanted.value:
            return wanted
    raise ValidationError("state", "a resend takes FAILED or RENDERING_FAILURE deliveries")


class DeliveryFilter(NamedTuple):
    """Which deliveries to resend (None: any)."""

    message_id: str | None = None
    recipient: str | None = None
    campaign: str | None = None
    state: str | None = None  # FAILED or RENDERING_FAILURE; None: both
    since: int | None = None
    until: int | None = None


@dataclass
class Resent:
    resent: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (delivery id, why)


def resend(store: EmailStore, clock: Clock, queues: QueueService,
           wanted: DeliveryFilter) -> Resent:
    states = RESENDABLE if wanted.state is None else (_resendable(wanted.state),)
    ensure_internal_queues(queues)
    queue = queues.get_queue(EMAIL_QUEUE)
    outcome = Resent()
    for state in states:
        query = DeliveryQuery(
            message_id=wanted.message_id, state=state,
            recipient=normalise_address(wanted.recipient) if wanted.recipient else None,
            schedule_prefix=f"{wanted.campaign}/" if wanted.campaign else None,
            created_from=wanted.since, created_until=wanted.until)
        after = 0
        while True:
            page = store.find_deliveries(query, after, RESEND_PAGE)
            if not page:
                break
            after = page[-1].seq
            now = clock.now_ms()
            resends = []
            for d in page:
                if d.document is None:
                    outcome.skipped.append((d.id, "sent before tidings kept what to "
                                            "resend (no document)"))
                    continue
                job = {**json.loads(d.document), "resent_at": now,
                       "id": f"{d.id}/resend-{now}"}
                resends.append((d, queues.ops.new_message(queue, json.dumps(job), now=now)))
            won = store.resend_deliveries(resends, queue.id, now)
            outcome.resent += sum(won)
            outcome.skipped.extend((d.id, "changed meanwhile (resent already?)")
                                   for (d, _), ok in zip(resends, won, strict=True) if not ok)
    if outcome.resent:
        queues.notifier.notify(queue_channel(queue.id))
    return outcome
