"""Three nodes on one PostgreSQL database push one subscription: together they never have
more pushes under way than its concurrency, and every message is delivered once."""

from __future__ import annotations

import asyncio
from contextlib import ExitStack

from push_receiver import Answer, Pushed, Receiver, running_pushers, wait_until
from serving import running_server

from conftest import pg_url
from tidings.client import Tidings
from tidings.settings import Settings


def _pushed_by_three_nodes(pg_schema: str, *, n: int, concurrency: int,
                           limit: int | None = None) -> tuple[Receiver, set[str]]:
    """`n` messages of queue `jobs`, subscribed with `concurrency` (and a concurrency
    limit on `push:jobs` if given), pushed by three nodes to a receiver that takes 50 ms a
    push, until the queue is empty: the receiver and the ids sent."""
    async def slow(_p: Pushed, _n: int) -> Answer:
        await asyncio.sleep(0.05)
        return 200, {}, b""

    receiver = Receiver(slow)
    url = pg_url(pg_schema)
    with ExitStack() as stack:
        nodes = [stack.enter_context(Tidings(settings=Settings(db=url))) for _ in range(3)]
        first = nodes[0]
        first.queues.create_queue("jobs")
        if limit is not None:
            first.limits.set("push:jobs", concurrency=limit)
        hook = stack.enter_context(running_server(receiver))
        first.queues.subscribe("jobs", hook, concurrency=concurrency)
        sent = {first.queues.send("jobs", {"i": i}).message_id for i in range(n)}
        for t in nodes:
            stack.enter_context(running_pushers(t))

        def drained() -> bool:
            c = first.queues.describe("jobs").counts
            return c.visible + c.in_flight + c.delayed == 0

        wait_until(drained, 120, "every message pushed")
    return receiver, sent


def test_three_nodes_share_the_concurrency(pg_schema: str) -> None:
    receiver, sent = _pushed_by_three_nodes(pg_schema, n=120, concurrency=4)
    assert sorted(receiver.ids()) == sorted(sent)  # each once
    assert receiver.max_in_flight <= 4
    assert receiver.max_in_flight >= 2  # they did run side by side


def test_a_limit_on_the_key_holds_for_the_three_nodes_together(pg_schema: str) -> None:
    """`tidings limit set push:jobs --concurrency 2` under a subscription of 8: the three
    nodes together push at most 2 at once (the limit goes through the shared slots)."""
    receiver, sent = _pushed_by_three_nodes(pg_schema, n=60, concurrency=8, limit=2)
    assert sorted(receiver.ids()) == sorted(sent)
    assert receiver.max_in_flight == 2  # not 8, nor 2 a node
