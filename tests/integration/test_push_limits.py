"""A push subscription's downstream limit, the key `push:<queue>`, and a queue's deletion
taking its subscription with it: real HTTP endpoints over loopback, on every backend."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from push_receiver import Answer, Pushed, Receiver, empty, running_pushers, wait_until
from serving import running_server

from tidings.client import Tidings
from tidings.model.push import SubscriptionNotFound
from tidings.settings import Settings
from tidings.store.migrate import split_statements
from tidings.store.sqlfiles import migrations

#: A Retry-After far beyond every wait of these tests: a push that arrives was let go by
#: something else than the pause running out.
LONG_S = 600


@pytest.fixture
def t(db_url: str) -> Iterator[Tidings]:
    with Tidings(settings=Settings(db=db_url)) as client:
        yield client


def paused_until(t: Tidings, key: str) -> int | None:
    return next((v.paused_until for v in t.limits.list() if v.key == key), None)


def test_retry_after_pauses_the_limit_key_and_resuming_lifts_it(t: Tidings) -> None:
    async def busy_once(_p: Pushed, n: int) -> Answer:
        return ((429, {"retry-after": str(LONG_S)}, b"slow down") if n == 1
                else (200, {}, b""))

    busy, other = Receiver(busy_once), Receiver()
    t.queues.create_queue("jobs")
    t.queues.create_queue("mail")
    with running_server(busy) as url, running_server(other) as other_url:
        t.queues.subscribe("jobs", url)
        t.queues.subscribe("mail", other_url)
        t.queues.send("jobs", "x")
        with running_pushers(t):
            wait_until(lambda: paused_until(t, "push:jobs") is not None,
                       what="the limit key paused")
            now = t.clock.now_ms()
            until = paused_until(t, "push:jobs")
            assert until is not None and now < until <= now + LONG_S * 1000
            assert t.queues.subscription("jobs").held_until == until  # shown to the user
            # the pause is the subscription's alone: another queue's pushes go on
            t.queues.send("mail", "y")
            wait_until(lambda: empty(t, "mail"), what="the other queue's push")
            assert len(busy.requests) == 1  # held back
            # resuming the subscription lifts the pause: pushed long before it would end
            t.queues.resume_subscription("jobs")
            wait_until(lambda: empty(t, "jobs"), timeout_s=20, what="the push after resume")
    assert paused_until(t, "push:jobs") is None
    first, second = busy.requests
    assert second.headers["webhook-id"] == first.headers["webhook-id"]
    assert second.headers["tidings-receive-count"] == "1"  # the 429 spent no attempt


def test_an_operators_resume_of_the_key_lets_the_pushes_go(t: Tidings) -> None:
    async def busy_once(_p: Pushed, n: int) -> Answer:
        return ((503, {"retry-after": str(LONG_S)}, b"") if n == 1 else (200, {}, b""))

    receiver = Receiver(busy_once)
    t.queues.create_queue("jobs")
    with running_server(receiver) as url:
        t.queues.subscribe("jobs", url)
        t.queues.send("jobs", "x")
        with running_pushers(t):
            wait_until(lambda: paused_until(t, "push:jobs") is not None,
                       what="the limit key paused")
            t.limits.resume("push:jobs")  # long before the pause would end
            wait_until(lambda: empty(t, "jobs"), timeout_s=20,
                       what="the push after the key's resume")
    first, second = receiver.requests
    assert second.headers["webhook-id"] == first.headers["webhook-id"]


def test_a_limit_on_the_key_lowers_the_concurrency(t: Tidings) -> None:
    async def slow(_p: Pushed, _n: int) -> Answer:
        await asyncio.sleep(0.05)
        return 200, {}, b""

    receiver = Receiver(slow)
    t.queues.create_queue("jobs")
    t.limits.set("push:jobs", concurrency=2)
    with running_server(receiver) as url:
        t.queues.subscribe("jobs", url, concurrency=8)
        for i in range(40):
            t.queues.send("jobs", {"n": i})
        with running_pushers(t):
            wait_until(lambda: empty(t, "jobs"), what="40 pushes")
    assert len(receiver.requests) == 40
    assert receiver.max_in_flight == 2  # not the subscription's 8


def test_a_limit_on_the_key_lowers_the_rate(t: Tidings) -> None:
    t.queues.create_queue("jobs")
    t.limits.set("push:jobs", rate="10/s")
    receiver = Receiver()
    with running_server(receiver) as url:
        t.queues.subscribe("jobs", url, concurrency=8, rate="1000/s")
        for i in range(25):
            t.queues.send("jobs", {"n": i})
        with running_pushers(t):
            wait_until(lambda: empty(t, "jobs"), what="25 pushes")
    times = sorted(r.at for r in receiver.requests)
    # at 10/s with at most a second's worth at once: 25 pushes span at least 1.4 s
    assert times[-1] - times[0] >= 1.4


def test_deleting_a_queue_deletes_its_subscription(t: Tidings) -> None:
    t.queues.create_queue("jobs")
    receiver = Receiver()
    with running_server(receiver) as url:
        t.queues.subscribe("jobs", url)
        with running_pushers(t) as pushers:
            wait_until(lambda: len(pushers.pushers) == 1, what="the pusher started")
            t.queues.delete_queue("jobs")
            wait_until(lambda: not pushers.pushers, timeout_s=10,
                       what="the pusher stopped (its fallback read is a minute away)")
    assert t.store.list_subscriptions() == []
    assert t.queues.subscriptions() == []
    t.queues.create_queue("jobs")  # the name again: a new queue, with no subscription
    with pytest.raises(SubscriptionNotFound):
        t.queues.subscription("jobs")


def test_migration_0020_removes_the_subscriptions_of_deleted_queues(t: Tidings) -> None:
    """What an older release left: a subscription, its slots and failures, whose queue is
    gone (deleted with the queue's SQL alone, as that release did)."""
    t.queues.create_queue("gone")
    t.queues.create_queue("kept")
    t.queues.subscribe("gone", "http://127.0.0.1:9/hook", concurrency=3)
    t.queues.subscribe("kept", "http://127.0.0.1:9/hook", concurrency=2)
    gone = t.queues.get_queue("gone")
    store = t.store
    with store.driver.tx() as conn:  # type: ignore[attr-defined]
        conn.execute(store.q["delete_queue"], (gone.id,))  # type: ignore[attr-defined]
    assert len(store.list_subscriptions()) == 2
    backend = "postgres" if t.database_url.startswith("postgres") else "sqlite"
    [(_, _, sql)] = [m for m in migrations(backend) if m[0] == 20]
    with store.driver.tx() as conn:  # type: ignore[attr-defined]
        for statement in split_statements(sql):
            conn.execute(statement)
    [left] = store.list_subscriptions()
    assert left.queue_id == t.queues.get_queue("kept").id
    with store.driver.auto() as conn:  # type: ignore[attr-defined]
        slots = conn.execute("SELECT subscription_id FROM push_slots").fetchall()
    assert {r[0] for r in slots} == {left.id}


def pushed_within(receiver: Receiver, count: int, since: float) -> float:
    """Seconds from `since` (monotonic) to the `count`th request."""
    wait_until(lambda: len(receiver.requests) >= count, timeout_s=10,
               what=f"push number {count}")
    return receiver.requests[count - 1].at - since


def test_a_limit_change_reaches_a_running_subscription_by_its_wake_up(t: Tidings) -> None:
    """The pushers read the node's limit book, which the `limits` channel wakes: with its
    own reads a minute apart (and the pusher's next look an hour away, its rate's), a
    resumed key and a raised rate are obeyed within a second."""
    receiver = Receiver()
    t.queues.create_queue("jobs")
    t.limits.pause("push:jobs", t.clock.now_ms() + LONG_S * 1000)
    with running_server(receiver) as url:
        t.queues.subscribe("jobs", url, concurrency=4)
        t.queues.send("jobs", {"n": 0})
        with running_pushers(t, limits_refresh_s=60.0) as pushers:
            wait_until(lambda: len(pushers.pushers) == 1 and pushers.book.reads > 0,
                       what="the pusher and its limits")
            [(pusher, _)] = pushers.pushers.values()
            wait_until(lambda: not pusher.changed.is_set(), what="the pusher held back")
            assert receiver.requests == []
            t.limits.set("push:jobs", rate="1/h")  # one now, the next in an hour
            resumed = time.monotonic()
            t.limits.resume("push:jobs")
            assert pushed_within(receiver, 1, resumed) < 1.0
            t.queues.send("jobs", {"n": 1})
            wait_until(lambda: not pusher.changed.is_set(), what="the pusher waiting")
            assert len(receiver.requests) == 1  # the rate holds the second back
            raised = time.monotonic()
            t.limits.set("push:jobs", rate="100/s")
            assert pushed_within(receiver, 2, raised) < 1.0
