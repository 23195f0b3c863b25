"""Rows to records: each column lands in the field of its name (the rows are positional,
so a column added or moved in a query without its reader shows here)."""

from __future__ import annotations

import pytest

from tidings.model.messages import StoredMessage
from tidings.model.schedules import (
    ActionAfterCompletion,
    RetryPolicy,
    Schedule,
    ScheduleSpec,
    ScheduleState,
    Target,
    TargetKind,
    target_text,
)
from tidings.store import rows

ROW = (7, 9, "m-1", "body", "md5", '{"a": 1}', "md5a", 3, 1000, 900, 2000, "g", "d", 4,
       "err", 1234)


@pytest.mark.parametrize("fifo", [False, True])
def test_a_message_row_makes_its_record(fifo: bool) -> None:
    want = StoredMessage(
        row_id=7, lease_token=9, message_id="m-1", body="body", md5_body="md5",
        attributes_json='{"a": 1}', md5_attributes="md5a", receive_count=3,
        first_received_at=1000, sent_at=900, visible_at=2000, group_id="g",
        deduplication_id="d", sequence_number=7 if fifo else None, source_queue_id=4,
        last_error="err", scheduled_at=1234)
    assert rows.stored_message(ROW, fifo) == want  # a FIFO queue's sequence: the row id


def test_a_row_of_the_wrong_width_is_an_error() -> None:
    with pytest.raises(ValueError):
        rows.stored_message(ROW[:-1], False)


def test_a_schedule_row_makes_its_record() -> None:
    target = Target(TargetKind.QUEUE, "jobs", input='{"a": 1}')
    row = (7, "g", "n", "DISABLED", "rate(5 minutes)", "Europe/Paris", 1, 2, 15,
           target_text(target), "DELETE", "about", "tok", 100, 105, 90, 10, 20, 3)
    spec = ScheduleSpec("n", "rate(5 minutes)", target, group="g", timezone="Europe/Paris",
                        start_ms=1, end_ms=2, state=ScheduleState.DISABLED,
                        flexible_window_minutes=15,
                        action_after_completion=ActionAfterCompletion.DELETE,
                        description="about", client_token="tok")
    got = rows.schedule(row)
    assert got == Schedule(spec, 7, 100, 105, 90, 10, 20, version=3)
    assert got.spec.state is ScheduleState.DISABLED
    assert got.spec.action_after_completion is ActionAfterCompletion.DELETE


def test_a_stored_target_reads_back_as_written() -> None:
    targets = [
        Target(TargetKind.QUEUE, "jobs"),
        Target(TargetKind.QUEUE, "jobs.fifo", input='{"b": 2}', message_group_id="g",
               dead_letter_queue="dlq", role_arn="arn:aws:iam::1:role/r",
               arn="arn:aws:sqs:us-east-1:1:jobs.fifo"),
        Target(TargetKind.WEBHOOK, "https://example.com/hook", input="x",
               retry_policy=RetryPolicy(3, 120),
               options={"headers": {"X-A": "1"}, "timeout_s": 5}),
        Target(TargetKind.EMAIL, "", input='{"Content": {}}', options={"unsubscribe": True}),
    ]
    for target in targets:
        got = rows.target_of(target_text(target))
        assert got == target
        assert got.kind is target.kind
        assert got.options is not target.options  # its own dict
