"""A delivery dropped as a duplicate leaves a trace: a copy of a delivery job whose
execution id already ran to success (a redelivery after a crash between the delivery and
its acknowledgement) is acknowledged without delivering, counted, and written into the
schedule's firing history with the execution id it matched."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from faults import WebhookReceiver
from serving import run_until

from tidings.client import Tidings
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.node import Node
from tidings.queues.internal import DELIVERY_QUEUE, ensure_internal_queues
from tidings.runtime import metrics
from tidings.runtime.bridge import Bridge
from tidings.schedules.dispatcher import Dispatcher
from tidings.settings import Settings


@pytest.fixture
def t(db_url: str) -> Iterator[Tidings]:
    with Tidings(settings=Settings(db=db_url)) as client:  # the wall clock: it fires
        yield client


def _duplicates() -> float:
    return metrics.REGISTRY.get_sample_value("tidings_jobs_total",
                                             {"outcome": "duplicate"}) or 0.0


def test_a_copy_of_a_done_delivery_is_recorded_not_delivered(t: Tidings) -> None:
    receiver = WebhookReceiver()
    with receiver.running() as hook:
        t.schedules.create(ScheduleSpec("hook", time.strftime(
            "at(%Y-%m-%dT%H:%M:%S)", time.gmtime()), Target(TargetKind.WEBHOOK, hook,
                                                            input='{"n": 1}')))
        ensure_internal_queues(t.queues)
        dispatcher = Dispatcher(t.schedules, t.queues, t.store, t.clock, t.notifier, Bridge(1))
        assert dispatcher.fire_due() == 1
        [view], _ = t.queues.peek(DELIVERY_QUEUE)
        job = view.message.body  # what a redelivery after a crash would bring back
        before = _duplicates()
        copied = False

        def until() -> bool:
            nonlocal copied
            counts = t.queues.describe(DELIVERY_QUEUE).counts
            if not receiver.got or counts.visible + counts.in_flight:
                return False
            if not copied:  # the first ran to success: now its copy arrives
                t.queues.ops.enqueue_internal(DELIVERY_QUEUE, job)
                copied = True
                return False
            firings = t.schedule_search.detail("default", "hook").firings
            return any(f.outcome == "duplicate" for f in firings)

        node = Node(t, Settings(db=t.settings.db, concurrency=2, shutdown_grace_s=2))
        run_until(node, until, timeout=30)
    assert len(receiver.got) == 1  # delivered once
    execution_id = json.loads(job)["context"]["execution_id"]
    firings = t.schedule_search.detail("default", "hook").firings
    assert [f.outcome for f in firings] == ["duplicate", "delivered"]
    assert execution_id in (firings[0].detail or "")
    assert _duplicates() == before + 1
