"""Returned mail against the delivery log, on every backend, with the clock frozen: soft
bounces suppress once TIDINGS_EMAIL_SOFT_BOUNCES of them fall within the window, every
event joins its delivery's detail, and a hard bounce turns SENT into BOUNCED through the
delivery state machine (nothing else: a FAILED delivery stays FAILED)."""

from __future__ import annotations

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.email.returns import Returned
from tidings.model.email import Delivery, DeliveryState, SuppressionReason
from tidings.model.email_events import EventKind

DAY = 86_400_000


def soft(address: str, delivery_id: str | None = None) -> Returned:
    return Returned(address, EventKind.SOFT_BOUNCE, "dsn", "delayed 4.2.2: mailbox full",
                    delivery_id)


def logged(t: Tidings, delivery_id: str, state: DeliveryState) -> None:
    now = t.clock.now_ms()
    assert t.store.record_deliveries([Delivery(
        delivery_id, f"{delivery_id}@example.com", "news@example.com", ("ann@example.org",),
        state, now, now, detail="250 OK queued", attempts=1)]) == [True]


def test_soft_bounces_suppress_only_when_enough_fall_in_the_window(
        t: Tidings, clock: FrozenClock) -> None:
    returns = t.email.returns  # the defaults: 3 in 7 days
    returns.record([soft("ann@example.org")])
    clock.advance(8 * DAY)  # the first falls out of the window
    returns.record([soft("ann@example.org")])
    returns.record([soft("ann@example.org")])
    assert t.email.suppression("ann@example.org") is None  # 2 within 7 days
    clock.advance(6 * DAY)
    returns.record([soft("ann@example.org"), soft("bo@example.org")])
    entry = t.email.suppression("ann@example.org")
    assert entry is not None and entry.reason is SuppressionReason.BOUNCE
    assert entry.created_at == clock.now_ms()
    assert t.email.suppression("bo@example.org") is None
    assert returns.soft_bounces("ann@example.org") == 4


def test_events_join_the_delivery_detail_and_a_hard_bounce_turns_it_bounced(
        t: Tidings) -> None:
    logged(t, "d-sent", DeliveryState.SENT)
    logged(t, "d-failed", DeliveryState.FAILED)
    t.email.returns.record([soft("ann@example.org", "d-sent")])
    assert t.email.get_delivery("d-sent").state is DeliveryState.SENT
    t.email.returns.record([
        Returned("ann@example.org", EventKind.HARD_BOUNCE, "ses",
                 "Permanent General 5.1.1", "d-sent"),
        Returned("ann@example.org", EventKind.HARD_BOUNCE, "ses", "Permanent", "d-failed")])
    sent = t.email.get_delivery("d-sent")
    assert sent.state is DeliveryState.BOUNCED
    assert sent.detail == ("250 OK queued; SOFT_BOUNCE (dsn) ann@example.org: delayed "
                           "4.2.2: mailbox full; HARD_BOUNCE (ses) ann@example.org: "
                           "Permanent General 5.1.1")
    failed = t.email.get_delivery("d-failed")
    assert failed.state is DeliveryState.FAILED  # no move from FAILED to BOUNCED
    assert failed.detail == "250 OK queued; HARD_BOUNCE (ses) ann@example.org: Permanent"
