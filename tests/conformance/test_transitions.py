"""The state machines of `tidings.model.states`, checked against every store backend.

Messages: a message is put in each live state, each operation of `MESSAGE_TRANSITIONS` is
applied to it, and the state it ends in must be the table's target when the table lists
the state as a source, and unchanged otherwise. Stored statuses: each compare-and-set
edge (a stale receipt, a lost claim, a final delivery written twice, a stale move task,
racing receivers, a campaign cancelled while resumed) must refuse the loser.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tidings.client import Tidings
from tidings.errors import ConflictError, ValidationError
from tidings.model.campaigns import CampaignRecord, Step
from tidings.model.email import Delivery
from tidings.model.messages import NewMessage
from tidings.model.queues import MoveTask, QueueAttributes, RedrivePolicy
from tidings.model.receipts import Receipt
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.model.states import (
    MESSAGE_TRANSITIONS,
    CampaignStatus,
    DeliveryState,
    MessageOp,
    MessageState,
    MoveTaskStatus,
    message_state,
)
from tidings.store.base import (
    Firing,
    JobAck,
    NewSchedule,
    ReceiveOutcome,
    ReceiveParams,
    Rejection,
    Store,
    TargetMessage,
    VisibilityChange,
)

NOW = 1_800_000_000_000
VT = 30_000


@pytest.fixture
def store(t: Tidings) -> Iterator[Store]:
    yield t.store


def _message(n: int, visible_at: int) -> NewMessage:
    return NewMessage(f"m-{n}", f"body {n}", "0" * 32, None, None, visible_at, NOW - 1,
                      NOW + 86_400_000, None, None)


class Probe:
    """One queue (with a DLQ) holding one message in a chosen state."""

    def __init__(self, store: Store, state: MessageState, n: int) -> None:
        self.store = store
        self.dlq = store.create_queue(f"dlq-{n}", QueueAttributes.build(), NOW)
        self.queue = store.create_queue(f"q-{n}", QueueAttributes.build(
            redrive_policy=RedrivePolicy(self.dlq.name, 1)), NOW)
        delay = 10_000 if state is MessageState.DELAYED else 0
        store.send_messages(self.queue.id, [_message(n, NOW + delay)], fifo=False, now=NOW)
        [peeked] = store.peek_messages(self.queue.id, None, 10)
        self.receipt = Receipt(self.queue.id, peeked.row_id, 12345)  # never issued
        if state is MessageState.IN_FLIGHT:
            [got] = self._receive(max_receive_count=None).messages
            self.receipt = Receipt(self.queue.id, got.row_id, got.lease_token)
        self.before = self.state()
        assert self.before is state

    def _receive(self, max_receive_count: int | None) -> ReceiveOutcome:
        return self.store.receive_messages(ReceiveParams(
            self.queue.id, 10, VT, NOW, 777, False,
            self.dlq.id if max_receive_count else None, max_receive_count, 86_400_000))

    def state(self) -> MessageState:
        peeked = self.store.peek_messages(self.queue.id, None, 10)
        if not peeked:
            if self.store.peek_messages(self.dlq.id, None, 10):
                return MessageState.DEAD_LETTERED
            return MessageState.GONE
        [m] = peeked
        return message_state(visible_at=m.visible_at, leased=m.lease_token is not None, now=NOW)

    def apply(self, op: MessageOp) -> None:
        s, q = self.store, self.queue.id
        if op is MessageOp.RECEIVE:
            self._receive(max_receive_count=None)
        elif op is MessageOp.DEAD_LETTER:
            # A message is at maxReceiveCount (1) once received: make the visible one so.
            if self.before is MessageState.VISIBLE:
                self._receive(max_receive_count=None)
                [m] = s.peek_messages(q, None, 1)
                s.change_visibility(q, [VisibilityChange(Receipt(q, m.row_id, 777), NOW)],
                                    NOW - 1)
            self._receive(max_receive_count=1)
        elif op is MessageOp.CHANGE_VISIBILITY:
            s.change_visibility(q, [VisibilityChange(self.receipt, NOW + 60_000)], NOW)
        elif op is MessageOp.REJECT:
            s.reject_messages(q, [Rejection(self.receipt, "NotAJob: not JSON")], self.dlq.id,
                              86_400_000, NOW)
        elif op is MessageOp.DELETE:
            s.delete_messages(q, [self.receipt])
        elif op is MessageOp.COMPLETE_JOB:
            s.complete_jobs(q, [JobAck(self.receipt, "job-1")], NOW)
        elif op is MessageOp.EXPIRE:
            s.expire_messages(NOW + 86_400_000, 100)
        elif op is MessageOp.PURGE:
            s.purge_queue(q, NOW)
        elif op is MessageOp.MOVE:
            s.move_messages(q, self.dlq.id, 10, NOW)
        elif op is MessageOp.CANCEL:
            # by the instant it is visible from now, as a task handle knows it
            [m] = s.peek_messages(q, None, 1)
            s.cancel_message(q, m.message_id, m.visible_at, NOW)


LIVE = [MessageState.DELAYED, MessageState.VISIBLE, MessageState.IN_FLIGHT]


@pytest.mark.parametrize("op", list(MessageOp))
def test_each_message_operation_changes_exactly_the_states_its_table_allows(
        store: Store, op: MessageOp) -> None:
    rule = MESSAGE_TRANSITIONS[op]
    for n, state in enumerate(LIVE):
        probe = Probe(store, state, n)
        probe.apply(op)
        after = probe.state()
        if op is MessageOp.MOVE and state in rule.sources:
            # moved to the "DLQ" of the probe, visible there at once
            [m] = store.peek_messages(probe.dlq.id, None, 10)
            moved = message_state(visible_at=m.visible_at, leased=m.lease_token is not None,
                                  now=NOW)
            assert moved is rule.target, state
        elif state in rule.sources:
            assert after is rule.target, (op, state, after)
        else:
            assert after is state, (op, state, after)


def test_a_stale_receipt_neither_deletes_nor_extends(store: Store) -> None:
    probe = Probe(store, MessageState.IN_FLIGHT, 0)
    stale = probe.receipt
    # the lease runs out and someone else receives it: a new lease token
    later = ReceiveParams(probe.queue.id, 1, VT, NOW + VT + 1, 888, False)
    [again] = store.receive_messages(later).messages
    assert store.change_visibility(probe.queue.id, [VisibilityChange(stale, NOW + VT + 5)],
                                   NOW + VT + 2) == [False]
    assert store.delete_messages(probe.queue.id, [stale]) == [False]
    assert store.complete_jobs(probe.queue.id, [JobAck(stale, "j")], NOW + VT + 2) == [False]
    assert store.reject_messages(probe.queue.id, [Rejection(stale, "x")], probe.dlq.id, 1000,
                                 NOW + VT + 2) == [False]
    fresh = Receipt(probe.queue.id, again.row_id, again.lease_token)
    assert store.delete_messages(probe.queue.id, [fresh]) == [True]


def test_the_latest_receipt_still_deletes_after_its_lease_ran_out(store: Store) -> None:
    probe = Probe(store, MessageState.IN_FLIGHT, 0)
    q = probe.queue.id
    assert store.change_visibility(q, [VisibilityChange(probe.receipt, NOW)], NOW - 1) == [True]
    assert probe.state() is MessageState.VISIBLE  # its lease ran out; nobody received it
    assert store.delete_messages(q, [probe.receipt]) == [True]
    assert probe.state() is MessageState.GONE


def test_two_receivers_racing_never_lease_one_message_twice(db_url: str) -> None:
    stores = [Tidings(db_url), Tidings(db_url)]
    try:
        queue = stores[0].store.create_queue("race", QueueAttributes.build(), NOW)
        stores[0].store.send_messages(queue.id, [_message(i, NOW) for i in range(400)],
                                      fifo=False, now=NOW)
        got: list[list[int]] = [[], []]
        start = threading.Barrier(2)

        def receiver(i: int) -> None:
            start.wait()
            while True:
                out = stores[i].store.receive_messages(
                    ReceiveParams(queue.id, 10, VT, NOW, 100 + i, False)).messages
                if not out:
                    return
                got[i].extend(m.row_id for m in out)

        threads = [threading.Thread(target=receiver, args=(i,)) for i in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not set(got[0]) & set(got[1])
        assert len(got[0]) + len(got[1]) == 400
    finally:
        for s in stores:
            s.close()


def test_a_firing_writes_once_whichever_pass_completes_first(store: Store) -> None:
    queue = store.create_queue("fired", QueueAttributes.build(), NOW)
    spec = ScheduleSpec("once", "at(2027-01-01T00:00:00)", Target(TargetKind.QUEUE, "fired"))
    store.insert_schedules([NewSchedule(spec, NOW, NOW)], NOW)

    def firing(schedule_id: int, n: int) -> Firing:
        return Firing(schedule_id, NOW, None, None, delete=True, fired=True,
                      messages=[TargetMessage(queue.id, False, _message(n, NOW))])

    with store.firing_pass(NOW, 10, 10_000) as first:
        [claimed] = first.schedules
        # A second pass meanwhile (another dispatcher, or one that outlived its process):
        # SQLite's claim is a read, so it reads the row too and fires it first;
        # PostgreSQL's first pass holds the row's lock, so the second skips it.
        with store.firing_pass(NOW + 1, 10, 10_000) as second:
            assert second.complete([firing(s.id, 2) for s in second.schedules],
                                   NOW + 2) == [True] * len(second.schedules)
        won = not second.schedules
        assert first.complete([firing(claimed.id, 1)], NOW + 3) == [won]
    [m] = store.peek_messages(queue.id, None, 10)
    assert m.message_id == ("m-1" if won else "m-2")
    assert store.next_due_at() is None


def test_every_write_to_a_schedule_adds_one_to_its_version(store: Store) -> None:
    """What a firing pass's completion compares (`FiringPass.complete`): every write moves
    it, even one at the same instant with the same values, where `modified_at` stays."""
    store.create_queue("fired", QueueAttributes.build(), NOW)
    store.create_group("spring", {}, NOW)
    store.create_campaign(CampaignRecord("spring", (Step("s1"),), "tpl",
                                         CampaignStatus.ACTIVE, 0, 0, 0, 0, NOW, NOW))
    row = NewSchedule(ScheduleSpec("s", "rate(1 minute)", Target(TargetKind.QUEUE, "fired"),
                                   group="spring"), NOW, NOW)
    store.insert_schedules([row], NOW)
    versions = [store.get_schedule("spring", "s").version]
    store.replace_schedule(row, NOW)
    versions.append(store.get_schedule("spring", "s").version)
    with store.firing_pass(NOW, 10, 10_000) as p:
        [s] = p.schedules
        assert p.complete([Firing(s.id, NOW, NOW + 60_000, NOW + 60_000, delete=False,
                                  fired=True)], NOW) == [True]
    versions.append(store.get_schedule("spring", "s").version)
    store.set_campaign_status("spring", CampaignStatus.ACTIVE, CampaignStatus.PAUSED, NOW)
    versions.append(store.get_schedule("spring", "s").version)
    store.set_campaign_status("spring", CampaignStatus.PAUSED, CampaignStatus.ACTIVE, NOW)
    assert store.enable_campaign_schedules("spring", [("s", NOW + 60_000)], NOW) == 1
    latest = store.get_schedule("spring", "s")
    assert versions + [latest.version] == [0, 1, 2, 3, 4]
    assert latest.modified_at == NOW  # (unchanged all along: a frozen clock)


def _delivery(state: DeliveryState = DeliveryState.QUEUED) -> Delivery:
    return Delivery(id="d-1", message_id="d-1@x", sender="a@x.org", recipients=("b@x.org",),
                    state=state, created_at=NOW, updated_at=NOW)


def test_a_final_delivery_written_twice_keeps_the_first_outcome(store: Store) -> None:
    assert store.insert_delivery(_delivery())
    sent = _delivery(DeliveryState.SENT)
    failed = _delivery(DeliveryState.FAILED)
    assert store.record_deliveries([sent]) == [True]
    assert store.record_deliveries([failed]) == [False]  # a late duplicate attempt
    assert store.update_delivery("d-1", DeliveryState.QUEUED, DeliveryState.FAILED, "x", 2,
                                 NOW) is False
    stored = store.get_delivery("d-1")
    assert stored is not None and stored.state is DeliveryState.SENT
    with pytest.raises(ValidationError):  # the machine itself refuses SENT -> QUEUED
        store.update_delivery("d-1", DeliveryState.SENT, DeliveryState.QUEUED, None, 2, NOW)


def test_a_batch_of_outcomes_inserts_new_rows_and_moves_queued_ones(store: Store) -> None:
    """One group commit holding new deliveries, a retry whose row is QUEUED already, a
    final row written again and an id twice: every row gets its own answer, and each
    new row its recipient rows (the delivery log is searched by recipient)."""
    from dataclasses import replace

    assert store.insert_delivery(_delivery())  # d-1: QUEUED by an earlier attempt
    done = replace(_delivery(DeliveryState.SENT), id="d-3", recipients=("c@x.org",))
    assert store.record_deliveries([done]) == [True]
    new = replace(_delivery(DeliveryState.SENT), id="d-2",
                  recipients=("B2@x.org", "c2@x.org"))
    bounced = replace(_delivery(DeliveryState.BOUNCED), id="d-4", recipients=("d@x.org",))
    again = replace(bounced, state=DeliveryState.SENT)
    assert store.record_deliveries([
        new, _delivery(DeliveryState.SENT), replace(done, state=DeliveryState.FAILED),
        bounced, again]) == [True, True, False, True, False]
    states = {d: store.get_delivery(d) for d in ("d-1", "d-2", "d-3", "d-4")}
    assert {d: r.state if r else None for d, r in states.items()} == {
        "d-1": DeliveryState.SENT, "d-2": DeliveryState.SENT, "d-3": DeliveryState.SENT,
        "d-4": DeliveryState.BOUNCED}
    assert [d.id for d in store.list_deliveries("b2@x.org", None, None, 10)] == ["d-2"]
    assert [d.id for d in store.list_deliveries("d@x.org", None, None, 10)] == ["d-4"]


def test_a_stale_move_task_cannot_finish_a_cancelled_task(store: Store) -> None:
    dlq = store.create_queue("mt-dlq", QueueAttributes.build(), NOW)
    store.create_move_task(MoveTask("h-1", dlq.id, None, 10, MoveTaskStatus.RUNNING, 0, 5, NOW))
    store.set_move_task_status("h-1", MoveTaskStatus.RUNNING, MoveTaskStatus.CANCELLED)
    with pytest.raises(ConflictError):  # the sweeper's step read RUNNING before the cancel
        store.set_move_task_status("h-1", MoveTaskStatus.RUNNING, MoveTaskStatus.COMPLETED)
    [task] = store.list_move_tasks(dlq.id, 10)
    assert task.status is MoveTaskStatus.CANCELLED
    assert store.active_move_tasks() == []


def _campaign(store: Store, name: str, n: int) -> None:
    store.create_group(name, {}, NOW)
    store.create_campaign(CampaignRecord(name, (Step("s1"),), "tpl", CampaignStatus.ACTIVE,
                                         0, 0, 0, 0, NOW, NOW))
    store.insert_schedules([NewSchedule(ScheduleSpec(
        f"s1-{i}", "at(2027-01-01T00:00:00)", Target(TargetKind.QUEUE, "q"), group=name),
        NOW + 60_000, NOW + 60_000) for i in range(n)], NOW)


def test_a_campaign_cancelled_while_being_resumed_stays_cancelled(store: Store) -> None:
    _campaign(store, "spring", 20)
    assert store.set_campaign_status("spring", CampaignStatus.ACTIVE, CampaignStatus.PAUSED,
                                     NOW) == 20
    page = store.disabled_schedules("spring", "", 10)
    # resume: its status change wins, then a cancel lands before its first page
    store.set_campaign_status("spring", CampaignStatus.PAUSED, CampaignStatus.ACTIVE, NOW)
    assert store.set_campaign_status("spring", CampaignStatus.ACTIVE,
                                     CampaignStatus.CANCELLED, NOW) == 20
    with pytest.raises(ConflictError):
        store.enable_campaign_schedules("spring", [(n, NOW) for n, _, _ in page], NOW)
    with pytest.raises(ConflictError):  # a resume that read PAUSED before the cancel
        store.set_campaign_status("spring", CampaignStatus.PAUSED, CampaignStatus.ACTIVE, NOW)
    assert store.get_campaign("spring").status is CampaignStatus.CANCELLED
    assert store.schedule_state_counts("spring") == {}
    assert store.get_campaign("spring").cancelled == 20


def test_a_pause_overtaking_a_resume_leaves_nothing_enabled(store: Store) -> None:
    _campaign(store, "autumn", 30)
    store.set_campaign_status("autumn", CampaignStatus.ACTIVE, CampaignStatus.PAUSED, NOW)
    store.set_campaign_status("autumn", CampaignStatus.PAUSED, CampaignStatus.ACTIVE, NOW)
    first = store.disabled_schedules("autumn", "", 10)
    assert store.enable_campaign_schedules("autumn", [(n, NOW) for n, _, _ in first], NOW) == 10
    store.set_campaign_status("autumn", CampaignStatus.ACTIVE, CampaignStatus.PAUSED, NOW)
    rest = store.disabled_schedules("autumn", first[-1][0], 10)
    with pytest.raises(ConflictError):
        store.enable_campaign_schedules("autumn", [(n, NOW) for n, _, _ in rest], NOW)
    assert store.schedule_state_counts("autumn") == {"DISABLED": 30}


def test_two_receipts_of_one_message_in_one_batch_are_told_apart(store: Store) -> None:
    probe = Probe(store, MessageState.IN_FLIGHT, 0)
    old, q = probe.receipt, probe.queue.id
    later = ReceiveParams(q, 1, VT, NOW + VT + 1, 888, False)
    [again] = store.receive_messages(later).messages
    new = Receipt(q, again.row_id, again.lease_token)
    assert store.change_visibility(q, [VisibilityChange(new, NOW + VT + 9_000),
                                       VisibilityChange(old, NOW + VT + 9_000)],
                                   NOW + VT + 2) == [True, False]
    assert store.delete_messages(q, [old, new]) == [False, True]
