"""Delivery states: a final one is left only by a resend, back to QUEUED, or (SENT) by a
hard bounce that came back later."""

from __future__ import annotations

from tidings.model.email import FINAL_STATES, DeliveryState
from tidings.model.states import DELIVERIES


def test_final_delivery_states_never_change() -> None:
    assert DeliveryState.QUEUED not in FINAL_STATES
    assert FINAL_STATES == frozenset(DeliveryState) - {DeliveryState.QUEUED}
    # only a resend reopens a final state, and only back to QUEUED; returned mail only
    # turns SENT into BOUNCED
    assert all(DELIVERIES.moves[s] <= {DeliveryState.QUEUED} for s in FINAL_STATES
               if s is not DeliveryState.SENT)
    assert DELIVERIES.moves[DeliveryState.SENT] == {DeliveryState.BOUNCED}
