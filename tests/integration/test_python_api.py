"""Rough edges of the Python API a new user hit: JSON bodies, batch ids, named target
constructors, create-or-replace schedules."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

import tidings
from tidings.client import Tidings
from tidings.errors import ValidationError
from tidings.model.messages import OutgoingMessage


def test_send_takes_any_json_value_and_batches_number_their_entries(t: Tidings) -> None:
    t.queues.create_queue("jobs")
    t.queues.send("jobs", {"type": "invoice.generate", "id": 42})
    t.queues.send("jobs", [1, 2])
    with pytest.raises(ValidationError, match="MessageBody.*JSON"):
        t.queues.send("jobs", {1, 2})
    ok, failed = t.queues.send_batch("jobs", [OutgoingMessage("a"), OutgoingMessage("b")])
    assert [r.entry_id for r in ok] == ["0", "1"] and failed == []
    bodies = sorted(m.body for m in t.queues.receive("jobs", 10, wait_s=0))
    assert bodies == sorted(['{"type": "invoice.generate", "id": 42}', "[1, 2]", "a", "b"])


def test_targets_have_named_constructors(t: Tidings) -> None:
    t.queues.create_queue("jobs")
    q = tidings.Target.queue("jobs", {"type": "report"})
    assert (q.kind, q.destination, json.loads(q.input or "")) == ("queue", "jobs",
                                                                  {"type": "report"})
    w = tidings.Target.webhook("https://example.test/hook", {"a": 1}, secret="s", timeout_s=5)
    assert w.options == {"secret": "s", "timeout_s": 5}
    assert tidings.Target.function("notify").destination == "notify"
    e = tidings.Target.email({"FromEmailAddress": "a@example.test"}, unsubscribe=False)
    assert e.kind == "email" and e.options == {"unsubscribe": False}
    made = t.schedules.create(tidings.ScheduleSpec.once(
        "report", datetime(2030, 1, 1, tzinfo=UTC), q))
    assert made.spec.target.input == q.input


def test_put_creates_or_replaces_and_leaves_an_identical_schedule_alone(t: Tidings,
                                                                       clock: object) -> None:
    t.queues.create_queue("jobs")
    spec = tidings.ScheduleSpec("nightly", "cron(0 2 * * ? *)", tidings.Target.queue("jobs"))
    first = t.schedules.put(spec)
    again = t.schedules.put(spec)
    assert again.id == first.id and again.modified_at == first.modified_at
    changed = t.schedules.put(tidings.ScheduleSpec("nightly", "cron(0 3 * * ? *)",
                                                   tidings.Target.queue("jobs")))
    assert changed.id == first.id and changed.spec.expression == "cron(0 3 * * ? *)"
    assert len(t.schedules.list()[0]) == 1
