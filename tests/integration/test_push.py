"""Push subscriptions against real HTTP endpoints over loopback, on every backend: the
request and its Standard Webhooks signature, 2xx, failures, timeouts, Retry-After, the
dead-letter queue, FIFO order."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest
from push_receiver import Answer, Pushed, Receiver, empty, running_pushers, wait_until
from serving import running_server
from standardwebhooks import Webhook

from tidings.client import Tidings
from tidings.model.digests import MessageAttributeValue
from tidings.model.push import SubscriptionState
from tidings.model.queues import RedrivePolicy
from tidings.runtime.metrics import REGISTRY
from tidings.settings import Settings


@pytest.fixture
def t(db_url: str) -> Iterator[Tidings]:
    with Tidings(settings=Settings(db=db_url)) as client:
        yield client


def test_pushes_are_signed_as_standard_webhooks_sign(t: Tidings) -> None:
    receiver = Receiver()
    pushed_before = sample("tidings_push_pushed_total", queue="jobs")
    t.queues.create_queue("jobs")
    with running_server(receiver) as url:
        view = t.queues.subscribe("jobs", f"{url}/hook", concurrency=4)
        secret = view.subscription.secret
        assert secret.startswith("whsec_")
        assert "secret" not in t.queues.subscription("jobs").to_json()
        kind = {"kind": MessageAttributeValue("String", "test")}
        sent = [t.queues.send("jobs", {"n": i}, attributes=kind).message_id
                for i in range(20)]
        with running_pushers(t):
            wait_until(lambda: len(receiver.requests) >= 20 and empty(t, "jobs"),
                       what="20 pushes acknowledged")
    assert sorted(receiver.ids()) == sorted(sent)
    assert sample("tidings_push_pushed_total", queue="jobs") - pushed_before == 20
    assert sample("tidings_push_latency_seconds_count", queue="jobs") >= 20
    verifier = Webhook(secret)
    for r in receiver.requests:
        assert verifier.verify(r.body, r.headers)["n"] in range(20)
        assert r.headers["content-type"] == "application/json"
        assert r.headers["tidings-queue"] == "jobs"
        assert r.headers["tidings-receive-count"] == "1"
        assert int(r.headers["tidings-sent-timestamp"]) > 0
        attrs = json.loads(r.headers["tidings-message-attributes"])
        assert attrs == {"kind": {"DataType": "String", "StringValue": "test"}}
    with pytest.raises(Exception, match="signature"):
        Webhook("whsec_" + "A" * 43 + "=").verify(receiver.requests[0].body,
                                                 receiver.requests[0].headers)


def test_a_rotated_secret_signs_beside_the_new_one(t: Tidings) -> None:
    receiver = Receiver()
    t.queues.create_queue("jobs")
    with running_server(receiver) as url:
        old = t.queues.subscribe("jobs", url).subscription.secret
        new = t.queues.rotate_subscription_secret("jobs").subscription.secret
        t.queues.send("jobs", "hello")
        with running_pushers(t):
            wait_until(lambda: empty(t, "jobs"), what="the push")
    r = receiver.requests[0]
    assert len(r.headers["webhook-signature"].split(" ")) == 2
    assert Webhook(old).verify(r.body, r.headers, json_parse=False) is None
    assert Webhook(new).verify(r.body, r.headers, json_parse=False) is None
    assert r.headers["content-type"].startswith("text/plain")


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_failures_are_retried_then_dead_lettered_with_the_status(t: Tidings) -> None:
    failed_before = sample("tidings_push_failed_total", queue="jobs", status="500")
    async def broken(_p: Pushed, _n: int) -> Answer:
        return 500, {}, b"the database is on fire" * 50

    receiver = Receiver(broken)
    t.queues.create_queue("jobs-dlq")
    t.queues.create_queue("jobs", redrive_policy=RedrivePolicy("jobs-dlq", 3))
    with running_server(receiver) as url:
        t.queues.subscribe("jobs", url)
        message_id = t.queues.send("jobs", "x").message_id
        with running_pushers(t):
            wait_until(lambda: t.queues.describe("jobs-dlq").counts.visible == 1,
                       what="the message in the DLQ")
    assert receiver.ids() == [message_id] * 3
    assert [r.headers["tidings-receive-count"] for r in receiver.requests] == ["1", "2", "3"]
    dead = t.queues.peek("jobs-dlq")[0][0].message
    assert dead.last_error is not None
    assert dead.last_error.startswith("HTTP500: 500 Internal Server Error: the database is")
    got = t.queues.receive("jobs-dlq")[0]
    assert got.attributes["ERROR_CODE"].string_value == "HTTP500"
    failures = t.queues.push_failures("jobs")
    assert [f.status for f in failures] == [500, 500, 500]
    assert sample("tidings_push_failed_total", queue="jobs", status="500") - failed_before == 3


def test_a_timeout_fails_the_push_and_the_next_attempt_delivers(t: Tidings) -> None:
    async def slow_once(_p: Pushed, n: int) -> Answer:
        if n == 1:
            await asyncio.sleep(2)
        return 200, {}, b""

    receiver = Receiver(slow_once)
    t.queues.create_queue("jobs")
    with running_server(receiver) as url:
        t.queues.subscribe("jobs", url, timeout="200ms")
        t.queues.send("jobs", "x")
        with running_pushers(t):
            wait_until(lambda: empty(t, "jobs"), what="the second attempt")
    assert [r.headers["tidings-receive-count"] for r in receiver.requests] == ["1", "2"]
    assert t.queues.push_failures("jobs")[0].error.startswith("Timeout")


def test_retry_after_holds_the_subscription_without_spending_an_attempt(t: Tidings) -> None:
    async def busy_once(_p: Pushed, n: int) -> Answer:
        return (429, {"retry-after": "1"}, b"slow down") if n == 1 else (200, {}, b"")

    receiver = Receiver(busy_once)
    t.queues.create_queue("jobs")
    with running_server(receiver) as url:
        t.queues.subscribe("jobs", url)
        t.queues.send("jobs", "x")
        with running_pushers(t):
            wait_until(lambda: empty(t, "jobs"), what="the push after the hold")
    first, second = receiver.requests
    assert second.at - first.at >= 0.9  # held for the Retry-After second
    assert second.headers["tidings-receive-count"] == "1"  # no attempt spent


def test_fifo_groups_are_pushed_in_order_under_failures(t: Tidings) -> None:
    async def flaky(p: Pushed, _n: int) -> Answer:
        # Every third message fails its first attempt.
        body = json.loads(p.body)
        if body["i"] % 3 == 0 and p.headers["tidings-receive-count"] == "1":
            return 503, {}, b"not now"
        return 200, {}, b""

    receiver = Receiver(flaky)
    t.queues.create_queue("jobs.fifo", content_based_deduplication=True)
    with running_server(receiver) as url:
        t.queues.subscribe("jobs.fifo", url, concurrency=8)
        for i in range(10):
            for g in "abc":
                t.queues.send("jobs.fifo", {"g": g, "i": i}, group_id=g)
        with running_pushers(t):
            wait_until(lambda: empty(t, "jobs.fifo"), what="every group pushed")
    delivered: dict[str, list[int]] = {}
    for r in receiver.requests:
        body = json.loads(r.body)
        assert r.headers["tidings-message-group-id"] == body["g"]
        if not (body["i"] % 3 == 0 and r.headers["tidings-receive-count"] == "1"):
            delivered.setdefault(body["g"], []).append(body["i"])
    assert delivered == {g: list(range(10)) for g in "abc"}


def test_a_paused_subscription_pushes_nothing_until_resumed(t: Tidings) -> None:
    receiver = Receiver()
    t.queues.create_queue("jobs")
    with running_server(receiver) as url:
        t.queues.subscribe("jobs", url)
        assert t.queues.pause_subscription("jobs").subscription.state is \
            SubscriptionState.PAUSED
        t.queues.send("jobs", "x")
        with running_pushers(t) as pushers:
            wait_until(lambda: not pushers.pushers, what="no pusher for a paused one")
            assert receiver.requests == []
            t.queues.resume_subscription("jobs")
            wait_until(lambda: empty(t, "jobs"), what="the push after resume")
    assert len(receiver.requests) == 1


def test_a_receiver_cut_off_mid_request_gets_the_message_again(t: Tidings) -> None:
    """The endpoint's process dies while it holds the request: the connection closes with
    no answer, the push fails, and the next attempt delivers."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    cut: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            data = conn.recv(65536)
            if not cut:  # the first request: read, then gone without a word
                cut.append(data)
                conn.close()
                continue
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    t.queues.create_queue("jobs")
    t.queues.subscribe("jobs", f"http://127.0.0.1:{port}/")
    t.queues.send("jobs", "x")
    try:
        with running_pushers(t):
            wait_until(lambda: empty(t, "jobs"), what="the second attempt")
    finally:
        listener.close()
    assert cut and b"webhook-signature" in cut[0].lower()
    assert t.queues.push_failures("jobs")[0].error.startswith("ConnectionError")


def test_a_subscription_made_by_another_process_is_pushed_at_once(t: Tidings, db_url: str) -> None:
    """The pushers read the subscriptions again when the store's wake-up says one changed
    (their fallback read is a minute away here), from another process too: a web process
    or a CLI subscribes, pauses and deletes while the node runs."""
    receiver = Receiver()
    t.queues.create_queue("jobs")

    def other_process(code: str) -> None:
        subprocess.run([sys.executable, "-c",
                        "import sys; from tidings.client import Tidings\n"
                        "from tidings.settings import Settings\n"
                        "with Tidings(settings=Settings(db=sys.argv[1])) as t:\n    " + code,
                        db_url], check=True, timeout=60)

    with running_server(receiver) as url, running_pushers(t) as pushers:
        t.queues.send("jobs", "first")
        other_process(f"t.queues.subscribe('jobs', {url!r})")
        wait_until(lambda: len(receiver.requests) == 1 and empty(t, "jobs"), timeout_s=10,
                   what="the first push, long before the fallback read")
        other_process("t.queues.pause_subscription('jobs')")
        wait_until(lambda: not pushers.pushers, timeout_s=10, what="the pusher stopped")
        t.queues.send("jobs", "second")  # paused: it waits in the queue
        other_process("t.queues.resume_subscription('jobs')")
        wait_until(lambda: len(receiver.requests) == 2 and empty(t, "jobs"), timeout_s=10,
                   what="the push after the resume")
        other_process("t.queues.unsubscribe('jobs')")
        wait_until(lambda: not pushers.pushers, timeout_s=10, what="the pusher stopped")
        t.queues.send("jobs", "third")
        assert t.queues.describe("jobs").counts.visible == 1
    assert [r.body for r in receiver.requests] == [b"first", b"second"]
