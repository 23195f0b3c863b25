"""A node killed -9 mid-push loses nothing: the messages it was pushing come back when
their lease runs out, and another node pushes them; at most those under way (answered but
not yet deleted, or waiting for their answer) are pushed twice."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from faults import Serve, backlog
from push_receiver import Answer, Pushed, Receiver, wait_until
from serving import running_server

from tidings.client import Tidings
from tidings.settings import Settings

pytestmark = pytest.mark.slow
CONCURRENCY = 4


def test_kill_9_mid_push_loses_nothing(db_url: str, tmp_path: Path) -> None:
    async def slow(_p: Pushed, _n: int) -> Answer:
        await asyncio.sleep(0.2)
        return 200, {}, b""

    receiver = Receiver(slow)
    with running_server(receiver) as hook, Tidings(settings=Settings(db=db_url)) as t:
        t.queues.create_queue("jobs", visibility_timeout_s=1)
        t.queues.subscribe("jobs", hook, concurrency=CONCURRENCY, timeout="1s")
        sent = {t.queues.send("jobs", {"i": i}).message_id for i in range(60)}
        first = Serve(db_url, tmp_path, log_name="first.log")
        try:
            wait_until(lambda: len(receiver.requests) >= 10 and receiver.in_flight > 0, 120,
                       "the first node pushing")
            first.kill()
        finally:
            first.kill()
        pushed_before = len(receiver.requests)
        second = Serve(db_url, tmp_path, log_name="second.log")
        try:
            wait_until(lambda: backlog(db_url, ["jobs"]) == 0, 180, "the second node")
        finally:
            second.stop()
    times = Counter(receiver.ids())
    assert set(times) == sent  # nothing lost
    twice = [m for m, n in times.items() if n > 1]
    assert pushed_before < len(sent)  # it was killed mid-way
    # Those under way when it died: waiting for an answer, or answered with the delete
    # not yet committed.
    assert len(twice) <= 2 * CONCURRENCY, twice
