"""The state machines of tidings, each an enum with its transitions in one place.

A message's state is *derived* from its row, not stored: the visibility timeout is a lease
column (`visible_at` + `lease_token`), so a lease that runs out makes the message visible
again with no rescuer loop writing anything. Every write that depends on a state is a
compare-and-set on those columns (see the SQL beside each store).
"""

from __future__ import annotations

from enum import StrEnum


class MessageState(StrEnum):
    DELAYED = "delayed"  # sent with a delay that has not run out; never received yet
    VISIBLE = "visible"  # can be received now
    IN_FLIGHT = "in_flight"  # received; its lease (visibility timeout) has not run out
    DELETED = "deleted"  # acknowledged (terminal: the row is gone)
    DEAD_LETTERED = "dead_lettered"  # moved to the dead-letter queue (a new life there)
    EXPIRED = "expired"  # older than the queue's retention period (terminal: the row is gone)


#: Which operation moves a message from which state to which. The store SQL implements
#: exactly these; `tests/unit/model/test_states.py` checks the table is closed.
MESSAGE_TRANSITIONS: dict[tuple[MessageState, str], MessageState] = {
    (MessageState.DELAYED, "delay_elapsed"): MessageState.VISIBLE,
    (MessageState.VISIBLE, "receive"): MessageState.IN_FLIGHT,
    (MessageState.IN_FLIGHT, "lease_expired"): MessageState.VISIBLE,
    (MessageState.IN_FLIGHT, "change_visibility"): MessageState.IN_FLIGHT,
    (MessageState.IN_FLIGHT, "release"): MessageState.VISIBLE,  # change_visibility(0)
    (MessageState.IN_FLIGHT, "delete"): MessageState.DELETED,
    # maxReceiveCount is checked when a message would be received again: SQS moves it to
    # the DLQ instead of handing it out an extra time.
    (MessageState.VISIBLE, "exceed_max_receives"): MessageState.DEAD_LETTERED,
    (MessageState.DELAYED, "retention_elapsed"): MessageState.EXPIRED,
    (MessageState.VISIBLE, "retention_elapsed"): MessageState.EXPIRED,
    (MessageState.IN_FLIGHT, "retention_elapsed"): MessageState.EXPIRED,
    (MessageState.VISIBLE, "purge"): MessageState.DELETED,
    (MessageState.DELAYED, "purge"): MessageState.DELETED,
    (MessageState.IN_FLIGHT, "purge"): MessageState.DELETED,
}

TERMINAL_MESSAGE_STATES = frozenset(
    {MessageState.DELETED, MessageState.DEAD_LETTERED, MessageState.EXPIRED}
)


def message_state(*, visible_at: int, leased: bool, now: int) -> MessageState:
    """The state of a live message row at `now`."""
    if visible_at <= now:
        return MessageState.VISIBLE
    return MessageState.IN_FLIGHT if leased else MessageState.DELAYED


def next_message_state(state: MessageState, operation: str) -> MessageState:
    try:
        return MESSAGE_TRANSITIONS[(state, operation)]
    except KeyError:
        raise ValueError(f"no transition {operation!r} from {state}") from None


class MoveTaskStatus(StrEnum):
    """SQS message-move task statuses (ListMessageMoveTasks)."""

    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"


MOVE_TASK_TRANSITIONS: dict[MoveTaskStatus, frozenset[MoveTaskStatus]] = {
    MoveTaskStatus.RUNNING: frozenset(
        {MoveTaskStatus.COMPLETED, MoveTaskStatus.CANCELLED, MoveTaskStatus.FAILED}
    ),
    MoveTaskStatus.COMPLETED: frozenset(),
    MoveTaskStatus.CANCELLING: frozenset({MoveTaskStatus.CANCELLED}),
    MoveTaskStatus.CANCELLED: frozenset(),
    MoveTaskStatus.FAILED: frozenset(),
}
