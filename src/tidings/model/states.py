"""The state machines of tidings: each an enum and its transitions, in this one module.

Two kinds of machine:
- *Stored status* (deliveries, message move tasks, campaigns): a status column. The
  store changes it in one method per machine, which asks `StateMachine.check` here
  first and then writes with a compare-and-set
  (`UPDATE … WHERE key = ? AND status = <the status it read>`); a write that lost a race
  to another writer changes nothing and raises `ConflictError`.
- *Derived state* (messages): a message's state is read off its row, not stored. The
  visibility timeout is a lease column (`visible_at` + `lease_token`), so a lease that
  runs out makes the message visible again with no rescuer writing anything. Each
  operation in `MESSAGE_TRANSITIONS` is one store method whose SQL guards the source
  states (a stale receipt's lease token no longer matches; a receive only takes rows with
  `visible_at <= now`); `tests/conformance/test_transitions.py` puts a message in every
  state and checks each operation changes exactly the states this table allows.
- *Guarded in SQL* (job keys): a status column written only by batch statements whose
  WHERE clauses are the machine (`JobKeyState` says which moves they allow); no table
  here, since no write would read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

from tidings.errors import ValidationError

S = TypeVar("S", bound=StrEnum)


class StateMachine(Generic[S]):
    """A stored status and the moves allowed from each value."""

    def __init__(self, name: str, moves: Mapping[S, frozenset[S]]) -> None:
        self.name = name
        self.moves = dict(moves)

    def check(self, current: S, new: S) -> None:
        """Refuse a move the machine does not allow (a 400 naming the status)."""
        if new not in self.moves[current]:
            raise ValidationError("Status", f"a {self.name} that is {current.value} cannot "
                                  f"become {new.value}")

    def final(self) -> frozenset[S]:
        return frozenset(s for s, nxt in self.moves.items() if not nxt)


# messages (derived) ----------------------------------------------------------------------

class MessageState(StrEnum):
    DELAYED = "delayed"  # sent with a delay that has not run out; never received yet
    VISIBLE = "visible"  # can be received now
    IN_FLIGHT = "in_flight"  # received; its lease (visibility timeout) has not run out
    GONE = "gone"  # deleted, purged or expired: the row no longer exists
    DEAD_LETTERED = "dead_lettered"  # moved to the dead-letter queue (a new life there)


class MessageOp(StrEnum):
    """Every write to a message, named after the store method that performs it."""

    RECEIVE = "receive_messages"
    CHANGE_VISIBILITY = "change_visibility"
    DELETE = "delete_messages"
    COMPLETE_JOB = "complete_jobs"  # delete + the job's done record, one transaction
    DEAD_LETTER = "dead_letter"  # maxReceiveCount reached, inside a receive
    REJECT = "reject_messages"  # a poison message, to the DLQ at once
    EXPIRE = "expire_messages"
    PURGE = "purge_queue"
    MOVE = "move_messages"  # out of a DLQ (redrive / move task)
    CANCEL = "cancel_message"  # a delayed job withdrawn by its sender before it is due


_LIVE = frozenset({MessageState.DELAYED, MessageState.VISIBLE, MessageState.IN_FLIGHT})
_VISIBLE, _IN_FLIGHT = frozenset({MessageState.VISIBLE}), frozenset({MessageState.IN_FLIGHT})


@dataclass(frozen=True)
class MessageTransition:
    sources: frozenset[MessageState]  # states the operation applies to; others: no change
    target: MessageState


MESSAGE_TRANSITIONS: dict[MessageOp, MessageTransition] = {
    MessageOp.RECEIVE: MessageTransition(_VISIBLE, MessageState.IN_FLIGHT),
    # SQS: only an in-flight message's visibility can change; 0 releases it at once.
    MessageOp.CHANGE_VISIBILITY: MessageTransition(_IN_FLIGHT, MessageState.IN_FLIGHT),
    # Guarded by the receipt's lease token. As SQS documents, the receipt of the latest
    # receive still deletes after its lease ran out, as long as nobody received the message
    # again (it then looks VISIBLE); a receipt from an earlier receive deletes nothing.
    MessageOp.DELETE: MessageTransition(_IN_FLIGHT, MessageState.GONE),
    MessageOp.COMPLETE_JOB: MessageTransition(_IN_FLIGHT, MessageState.GONE),
    # maxReceiveCount is checked when a message would be received again: SQS moves it to
    # the DLQ instead of handing it out an extra time.
    MessageOp.DEAD_LETTER: MessageTransition(_VISIBLE, MessageState.DEAD_LETTERED),
    # A consumer's verdict on a message that can never succeed (not a job, no handler):
    # straight to the DLQ, guarded by its receipt's lease like a delete.
    MessageOp.REJECT: MessageTransition(_IN_FLIGHT, MessageState.DEAD_LETTERED),
    MessageOp.EXPIRE: MessageTransition(_LIVE, MessageState.GONE),
    MessageOp.PURGE: MessageTransition(_LIVE, MessageState.GONE),
    # Redrive takes what is in the DLQ, in flight or not (SQS moves "all messages").
    MessageOp.MOVE: MessageTransition(_LIVE, MessageState.VISIBLE),
    # Only before it is due: a visible or running job is no longer the sender's to take.
    MessageOp.CANCEL: MessageTransition(frozenset({MessageState.DELAYED}), MessageState.GONE),
}


def message_state(*, visible_at: int, leased: bool, now: int) -> MessageState:
    """The state of a live message row at `now`."""
    if visible_at <= now:
        return MessageState.VISIBLE
    return MessageState.IN_FLIGHT if leased else MessageState.DELAYED


# job keys -------------------------------------------------------------------------------

class JobKeyState(StrEnum):
    """A job's identity (`type:id`) on its queue. No row: never run, or forgotten.

    Like a message's, its moves are guarded in the SQL that makes them, never read and
    checked here first: a consumer reserves a key (no row, or RUNNING with a lease that ran
    out → RUNNING with its own lease, `reserve_job_keys`), extends its lease with its
    heartbeat, and on success marks it DONE in the transaction that deletes the message; a
    failure releases it (the row goes). A key that is DONE is never reserved again: its
    duplicates are acknowledged without running."""

    RUNNING = "running"  # reserved by the consumer running it, until its lease runs out
    DONE = "done"  # ran to success; written with the deletion of its message


# schedules ------------------------------------------------------------------------------

class ScheduleState(StrEnum):
    ENABLED = "ENABLED"
    DISABLED = "DISABLED"


# Any state may be replaced by any other (UpdateSchedule is a full replace, pause and
# resume flip a campaign's group): no table to check. What must not race is a schedule's
# firing, a compare-and-set on what its firing pass read of the row
# (`FiringPass.complete`).


# email deliveries -----------------------------------------------------------------------

class DeliveryState(StrEnum):
    QUEUED = "QUEUED"  # accepted; waiting for (another) attempt
    SENT = "SENT"  # the relay accepted the message
    SUPPRESSED = "SUPPRESSED"  # every recipient is on the suppression list: nothing sent
    BOUNCED = "BOUNCED"  # the relay refused it permanently (5xx): never retried
    FAILED = "FAILED"  # retries exhausted
    RENDERING_FAILURE = "RENDERING_FAILURE"  # the template could not be rendered with the data


#: A 4xx answer keeps a delivery QUEUED (a retry follows); every other outcome is final
#: for its attempts, so a late duplicate attempt (a job redelivered after its lease ran
#: out) cannot turn SENT back into anything else. Only an operator's resend (`tidings email
#: resend`) puts a FAILED or RENDERING_FAILURE delivery back in line, once per resend; a
#: BOUNCED address is suppressed, so a resend could only be suppressed again. A hard
#: bounce that comes back after the relay took the message (a DSN, a relay's webhook)
#: moves SENT to BOUNCED (`record_email_events`); no attempt does.
DELIVERIES: StateMachine[DeliveryState] = StateMachine("delivery", {
    DeliveryState.QUEUED: frozenset(DeliveryState),
    DeliveryState.SENT: frozenset({DeliveryState.BOUNCED}),
    DeliveryState.SUPPRESSED: frozenset(),
    DeliveryState.BOUNCED: frozenset(),
    DeliveryState.FAILED: frozenset({DeliveryState.QUEUED}),
    DeliveryState.RENDERING_FAILURE: frozenset({DeliveryState.QUEUED}),
})
#: The states no attempt changes any more (`final()` would miss those a resend reopens).
FINAL_DELIVERY_STATES = frozenset(DeliveryState) - {DeliveryState.QUEUED}


# message move tasks (SQS StartMessageMoveTask) ----------------------------------------

class MoveTaskStatus(StrEnum):
    """SQS lists a CANCELLING status too; here a cancel is one compare-and-set, final at
    once (a step already moving messages finishes them, and its COMPLETED loses)."""

    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"


MOVE_TASKS: StateMachine[MoveTaskStatus] = StateMachine("message move task", {
    MoveTaskStatus.RUNNING: frozenset({MoveTaskStatus.COMPLETED, MoveTaskStatus.CANCELLED,
                                       MoveTaskStatus.FAILED}),
    MoveTaskStatus.COMPLETED: frozenset(),
    MoveTaskStatus.CANCELLED: frozenset(),
    MoveTaskStatus.FAILED: frozenset(),
})


# campaigns ------------------------------------------------------------------------------

class CampaignStatus(StrEnum):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"  # every remaining schedule disabled
    CANCELLED = "CANCELLED"  # every remaining schedule deleted; final


CAMPAIGNS: StateMachine[CampaignStatus] = StateMachine("campaign", {
    CampaignStatus.ACTIVE: frozenset({CampaignStatus.PAUSED, CampaignStatus.CANCELLED}),
    CampaignStatus.PAUSED: frozenset({CampaignStatus.ACTIVE, CampaignStatus.CANCELLED}),
    CampaignStatus.CANCELLED: frozenset(),
})
