"""Queue semantics (SQS) over every store backend, through the queue service."""

from __future__ import annotations

import pytest

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.errors import (
    ConflictError,
    MessageNotInflight,
    PurgeInProgress,
    QueueNotFound,
    ReceiptHandleInvalid,
    ValidationError,
)
from tidings.model.digests import MessageAttributeValue
from tidings.model.messages import OutgoingMessage
from tidings.model.queues import RedriveAllowPolicy, RedrivePolicy


def test_create_get_list_delete(t: Tidings) -> None:
    q = t.queues
    rec = q.create_queue("jobs", visibility_timeout_s=45, tags={"team": "billing"})
    assert rec.attributes.visibility_timeout_s == 45
    assert rec.attributes.retention_s == 4 * 24 * 3600  # SQS default
    assert rec.attributes.max_message_bytes == 1024 * 1024
    assert q.get_queue("jobs").attributes.tags == {"team": "billing"}
    # same attributes again: returns the queue (SQS CreateQueue is idempotent)
    assert q.create_queue("jobs", visibility_timeout_s=45).id == rec.id
    with pytest.raises(ConflictError):
        q.create_queue("jobs", visibility_timeout_s=46)
    for i in range(5):
        q.create_queue(f"batch-{i}")
    page, token = q.list_queues("batch-", limit=2)
    assert [r.name for r in page] == ["batch-0", "batch-1"] and token
    page2, token2 = q.list_queues("batch-", limit=2, next_token=token)
    assert [r.name for r in page2] == ["batch-2", "batch-3"]
    page3, token3 = q.list_queues("batch-", limit=2, next_token=token2)
    assert [r.name for r in page3] == ["batch-4"] and token3 is None
    q.delete_queue("jobs")
    with pytest.raises(QueueNotFound):
        q.get_queue("jobs")


@pytest.mark.parametrize(
    ("attrs", "field", "text"),
    [
        ({"visibility_timeout_s": 43201}, "VisibilityTimeout", "0 to 43200"),
        ({"delay_s": 901}, "DelaySeconds", "0 to 900"),
        ({"retention_s": 59}, "MessageRetentionPeriod", "60 to 1209600"),
        ({"max_message_bytes": 1023}, "MaximumMessageSize", "1024 to 1048576"),
        ({"receive_wait_s": 21}, "ReceiveMessageWaitTimeSeconds", "0 to 20"),
        ({"content_based_deduplication": True}, "ContentBasedDeduplication", "FIFO"),
        ({"colour": "red"}, "colour", "not a queue attribute"),
    ],
)
def test_attribute_validation_names_field_and_range(
    t: Tidings, attrs: dict[str, object], field: str, text: str
) -> None:
    with pytest.raises(ValidationError) as err:
        t.queues.create_queue("q", **attrs)
    assert err.value.field == field
    assert text in str(err.value)


@pytest.mark.parametrize("name", ["", "has space", "x" * 81, "dot.name", "bad.fifo.fifo"])
def test_bad_queue_names(t: Tidings, name: str) -> None:
    with pytest.raises(ValidationError) as err:
        t.queues.create_queue(name)
    assert err.value.field == "QueueName"


def test_send_receive_delete_and_counters(t: Tidings, clock: FrozenClock) -> None:
    q = t.queues
    q.create_queue("jobs")
    sent = q.send("jobs", "hello", attributes={
        "kind": MessageAttributeValue("String", string_value="greeting")})
    q.send("jobs", "later", delay_s=60)
    counts = q.describe("jobs").counts
    assert (counts.visible, counts.in_flight, counts.delayed) == (1, 0, 1)
    [msg] = q.receive("jobs", 10, wait_s=0)
    assert msg.message_id == sent.message_id and msg.body == "hello"
    assert msg.md5_body == "5d41402abc4b2a76b9719d911017c592"
    assert msg.md5_attributes == sent.md5_attributes is not None
    assert msg.attributes["kind"].string_value == "greeting"
    sysattrs = msg.system_attributes()
    assert sysattrs["ApproximateReceiveCount"] == "1"
    assert sysattrs["SentTimestamp"] == str(clock.now_ms())
    counts = q.describe("jobs").counts
    assert (counts.visible, counts.in_flight, counts.delayed) == (0, 1, 1)
    assert q.delete("jobs", msg.receipt_handle) is True
    clock.advance(60_000)
    [later] = q.receive("jobs", wait_s=0)
    assert later.body == "later"
    q.delete("jobs", later.receipt_handle)
    counts = q.describe("jobs").counts
    assert (counts.visible, counts.in_flight, counts.delayed) == (0, 0, 0)


def test_visibility_expiry_redelivers_and_old_handle_is_stale(
    t: Tidings, clock: FrozenClock
) -> None:
    q = t.queues
    q.create_queue("jobs", visibility_timeout_s=30)
    q.send("jobs", "work")
    [first] = q.receive("jobs", wait_s=0)
    assert q.receive("jobs", wait_s=0) == []  # invisible while leased
    clock.advance(30_001)
    [second] = q.receive("jobs", wait_s=0)
    assert second.message_id == first.message_id and second.receive_count == 2
    assert second.receipt_handle != first.receipt_handle
    assert second.first_received_at == first.first_received_at
    # SQS: deleting with an out-of-date handle succeeds but does not delete the message
    assert q.delete("jobs", first.receipt_handle) is False
    with pytest.raises(MessageNotInflight):
        q.change_visibility("jobs", first.receipt_handle, 10)
    assert q.describe("jobs").counts.in_flight == 1
    assert q.delete("jobs", second.receipt_handle) is True


def test_tampered_or_foreign_receipt_rejected(t: Tidings) -> None:
    q = t.queues
    q.create_queue("a")
    q.create_queue("b")
    q.send("a", "x")
    [m] = q.receive("a", wait_s=0)
    handle = m.receipt_handle
    flipped = handle[:10] + ("A" if handle[10] != "A" else "B") + handle[11:]
    with pytest.raises(ReceiptHandleInvalid):
        q.delete("a", flipped)
    with pytest.raises(ReceiptHandleInvalid):
        q.delete("a", "not-a-handle")
    with pytest.raises(ReceiptHandleInvalid):
        q.delete("b", handle)  # valid signature, other queue
    assert q.delete("a", handle)


def test_change_visibility(t: Tidings, clock: FrozenClock) -> None:
    q = t.queues
    q.create_queue("jobs", visibility_timeout_s=30)
    q.send("jobs", "x")
    [m] = q.receive("jobs", wait_s=0)
    q.change_visibility("jobs", m.receipt_handle, 300)
    clock.advance(200_000)
    assert q.receive("jobs", wait_s=0) == []
    q.change_visibility("jobs", m.receipt_handle, 0)  # release now
    [again] = q.receive("jobs", wait_s=0)
    assert again.receive_count == 2
    with pytest.raises(ValidationError):
        q.change_visibility("jobs", again.receipt_handle, 43201)


def test_dead_letter_after_max_receive_count(t: Tidings, clock: FrozenClock) -> None:
    q = t.queues
    q.create_queue("dlq")
    q.create_queue("jobs", visibility_timeout_s=10,
                   redrive_policy=RedrivePolicy("dlq", max_receive_count=3))
    q.send("jobs", "poison")
    for attempt in range(1, 4):
        [m] = q.receive("jobs", wait_s=0)
        assert m.receive_count == attempt
        q.change_visibility("jobs", m.receipt_handle, 0, error=f"boom {attempt}")
    assert q.receive("jobs", wait_s=0) == []  # 4th receive moves it instead
    [dead] = q.receive("dlq", wait_s=0)
    assert dead.body == "poison" and dead.receive_count == 1
    assert dead.dead_letter_source == "arn:aws:sqs:us-east-1:000000000000:jobs"
    assert dead.last_error == "boom 3"
    # the reason, where an SQS client reads it
    assert dead.attributes["ERROR_MESSAGE"].string_value == "boom 3"
    assert q.describe("jobs").counts.visible == 0
    assert [r.name for r in q.dead_letter_sources("dlq")] == ["jobs"]


def test_redrive_policy_validation(t: Tidings) -> None:
    q = t.queues
    with pytest.raises(ValidationError) as err:
        q.create_queue("jobs", redrive_policy=RedrivePolicy("missing", 3))
    assert err.value.field == "RedrivePolicy.deadLetterTargetArn"
    q.create_queue("closed", redrive_allow_policy=RedriveAllowPolicy("denyAll"))
    with pytest.raises(ValidationError):
        q.create_queue("jobs", redrive_policy=RedrivePolicy("closed", 3))
    with pytest.raises(ValidationError) as err:
        q.create_queue("jobs", redrive_policy=RedrivePolicy("closed", 0))
    assert "maxReceiveCount" in err.value.field


def test_redrive_moves_back_to_source(t: Tidings, clock: FrozenClock) -> None:
    q = t.queues
    q.create_queue("dlq")
    q.create_queue("a", redrive_policy=RedrivePolicy("dlq", 1))
    q.create_queue("b", redrive_policy=RedrivePolicy("dlq", 1))
    for name in ("a", "b"):
        for i in range(3):
            q.send(name, f"{name}{i}")
        for _ in range(2):  # receive once (count 1), release; next receive dead-letters
            for m in q.receive(name, 10, wait_s=0):
                q.change_visibility(name, m.receipt_handle, 0)
    assert q.describe("dlq").counts.visible == 6
    with pytest.raises(ValidationError):
        q.redrive("a")  # not a DLQ
    assert q.redrive("dlq") == 6
    assert q.describe("a").counts.visible == 3 and q.describe("b").counts.visible == 3
    [m] = q.receive("a", 1, wait_s=0)
    assert m.receive_count == 1 and m.body.startswith("a")


def test_move_task_rate_limited(t: Tidings, clock: FrozenClock) -> None:
    q = t.queues
    q.create_queue("dlq")
    q.create_queue("src", redrive_policy=RedrivePolicy("dlq", 1))
    q.create_queue("dest")
    for i in range(10):
        q.send("src", str(i))
    for _ in range(2):
        for _ in range(2):
            for m in q.receive("src", 10, wait_s=0):
                q.change_visibility("src", m.receipt_handle, 0)
    assert q.describe("dlq").counts.visible == 10
    handle = q.start_move_task("dlq", "dest", max_per_second=3)
    with pytest.raises(ValidationError):
        q.start_move_task("dlq", "dest")  # one running task per source
    assert q.ops.advance_move_tasks(1.0) == 3
    [task] = q.list_move_tasks("dlq")
    assert task.status == "RUNNING" and task.moved == 3 and task.to_move == 10
    assert q.ops.advance_move_tasks(2.0) == 6
    assert q.ops.advance_move_tasks(1.0) == 1
    [task] = q.list_move_tasks("dlq")
    assert task.status == "COMPLETED" and task.moved == 10
    assert q.describe("dest").counts.visible == 10
    handle2 = q.start_move_task("dlq")
    q.cancel_move_task(handle2)
    assert q.list_move_tasks("dlq")[0].status == "CANCELLED"
    assert handle != handle2


def test_retention_expiry(t: Tidings, clock: FrozenClock) -> None:
    q = t.queues
    q.create_queue("short", retention_s=60)
    q.send("short", "old")
    clock.advance(59_000)
    q.send("short", "young")
    clock.advance(1_000)
    msgs = q.receive("short", 10, wait_s=0, visibility_s=0)
    assert [m.body for m in msgs] == ["young"]
    assert q.ops.sweep(job_memory_s=3600) == 1
    assert q.describe("short").counts.visible == 1


def test_fifo_order_groups_and_dedup(t: Tidings, clock: FrozenClock) -> None:
    q = t.queues
    q.create_queue("orders.fifo", visibility_timeout_s=30)
    with pytest.raises(ValidationError) as err:
        q.send("orders.fifo", "x", deduplication_id="d")
    assert err.value.field == "MessageGroupId"
    with pytest.raises(ValidationError) as err:
        q.send("orders.fifo", "x", group_id="g")
    assert err.value.field == "MessageDeduplicationId"
    seqs = []
    for i in range(4):
        for g in ("g1", "g2"):
            seqs.append(q.send("orders.fifo", f"{g}-{i}", group_id=g,
                               deduplication_id=f"{g}-{i}").sequence_number)
    assert seqs == sorted(seqs) and len(set(seqs)) == 8
    dup = q.send("orders.fifo", "g1-0 again", group_id="g1", deduplication_id="g1-0")
    assert dup.duplicate and q.describe("orders.fifo").counts.visible == 8
    first = q.receive("orders.fifo", 3, wait_s=0)
    assert [m.body for m in first] == ["g1-0", "g2-0", "g1-1"]
    # both groups have messages in flight: nothing more until they are done
    assert q.receive("orders.fifo", 10, wait_s=0) == []
    for m in first:
        if m.group_id == "g2":
            q.delete("orders.fifo", m.receipt_handle)
    assert [m.body for m in q.receive("orders.fifo", 2, wait_s=0)] == ["g2-1", "g2-2"]
    # g1's batch times out: it comes back first, in order
    clock.advance(30_001)
    again = q.receive("orders.fifo", 10, wait_s=0)
    assert [m.body for m in again][:2] == ["g1-0", "g1-1"]
    assert [m.body for m in again if m.group_id == "g1"] == ["g1-0", "g1-1", "g1-2", "g1-3"]


def test_fifo_content_dedup_window(t: Tidings, clock: FrozenClock) -> None:
    q = t.queues
    q.create_queue("c.fifo", content_based_deduplication=True)
    a = q.send("c.fifo", "same", group_id="g")
    b = q.send("c.fifo", "same", group_id="g")
    assert b.duplicate and b.message_id == a.message_id
    clock.advance(5 * 60 * 1000 + 1)
    c = q.send("c.fifo", "same", group_id="g")
    assert not c.duplicate and c.message_id != a.message_id
    assert q.describe("c.fifo").counts.visible == 2


def test_batch_send_per_entry_results(t: Tidings) -> None:
    q = t.queues
    q.create_queue("jobs", max_message_bytes=1024)
    ok, failed = q.send_batch("jobs", [
        OutgoingMessage("a", entry_id="1"),
        OutgoingMessage("x" * 2000, entry_id="2"),
        OutgoingMessage("c", entry_id="3", delay_s=5),
    ])
    assert [r.entry_id for r in ok] == ["1", "3"]
    assert [(f.entry_id, f.code) for f in failed] == [("2", "InvalidParameterValue")]
    assert "1024" in failed[0].message
    with pytest.raises(ValidationError):
        q.send_batch("jobs", [OutgoingMessage("a", entry_id="x")] * 2)  # duplicate ids
    with pytest.raises(ValidationError):
        q.send_batch("jobs", [OutgoingMessage("a", entry_id=str(i)) for i in range(11)])
    handles = [m.receipt_handle for m in q.receive("jobs", 10, wait_s=0)]
    deleted, failures = q.delete_batch("jobs", [("a", handles[0]), ("b", "garbage")])
    assert deleted == ["a"] and failures[0].code == "ReceiptHandleIsInvalid"


def test_message_validation(t: Tidings) -> None:
    q = t.queues
    q.create_queue("jobs")
    with pytest.raises(ValidationError) as err:
        q.send("jobs", "")
    assert err.value.field == "MessageBody"
    with pytest.raises(ValidationError) as err:
        q.send("jobs", "bad \x00 char")
    assert "U+0000" in str(err.value)
    with pytest.raises(ValidationError) as err:
        q.send("jobs", "x", delay_s=901)
    assert err.value.field == "DelaySeconds"
    too_many = {f"a{i}": MessageAttributeValue("String", string_value="v") for i in range(11)}
    with pytest.raises(ValidationError) as err:
        q.send("jobs", "x", attributes=too_many)
    assert "10" in str(err.value)
    # the native API may delay up to the retention period
    q.send("jobs", "in two days", delay_s=2 * 86400, max_delay_s=4 * 86400)
    assert q.describe("jobs").counts.delayed == 1
    with pytest.raises(QueueNotFound):
        q.send("nope", "x")


def test_purge_once_a_minute(t: Tidings, clock: FrozenClock) -> None:
    q = t.queues
    q.create_queue("jobs")
    for i in range(5):
        q.send("jobs", str(i))
    assert q.purge_queue("jobs") == 5
    assert q.describe("jobs").counts.visible == 0
    with pytest.raises(PurgeInProgress):
        q.purge_queue("jobs")
    clock.advance(60_000)
    assert q.purge_queue("jobs") == 0


def test_tags(t: Tidings) -> None:
    q = t.queues
    q.create_queue("jobs", tags={"a": "1"})
    q.tag_queue("jobs", {"b": "2"})
    q.untag_queue("jobs", ["a"])
    assert q.get_queue("jobs").attributes.tags == {"b": "2"}
