"""Schedules with a flexible window are spread inside it to fit their target's limit
(issue 33): a burst into a rate-limited queue key leaves at the limit's rate, inside the
window, and what the window cannot hold fires after it as early as the limit lets it,
never lost, and counted; a burst of webhook firings into a host's rate is written to the
delivery queue already spread so. The dispatcher's passes run on a frozen clock stepped
to each due instant, on every backend, with the store's own limits."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.limits.book import LimitBook
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.queues.internal import DELIVERY_QUEUE, ensure_internal_queues
from tidings.runtime.bridge import Bridge
from tidings.runtime.metrics import REGISTRY
from tidings.schedules.dispatcher import Dispatcher

WINDOW_MIN = 1
WINDOW_MS = WINDOW_MIN * 60_000


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def counted(name: str, kind: str = "queue") -> float:
    for family in REGISTRY.collect():
        if family.name == name:
            return sum(s.value for s in family.samples
                       if s.name.endswith("_total") and s.labels.get("kind") == kind)
    return 0.0


def busiest(instants_ms: list[int], window_ms: int) -> int:
    """The most instants within any window of `window_ms`."""
    ordered = sorted(instants_ms)
    most, j = 0, 0
    for i, a in enumerate(ordered):
        while j < len(ordered) and ordered[j] - a < window_ms:
            j += 1
        most = max(most, j - i)
    return most


def burst(t: Tidings, clock: FrozenClock, n: int, rate: str, *, webhook: bool = False,
          nodes: int = 1) -> tuple[int, dict[int, int], dict[int, int]]:
    """`n` one-shot schedules due at one instant with a WINDOW_MIN window into a queue
    (or a webhook's host) limited to `rate`, fired pass by pass (by `nodes` dispatchers
    in turn, each with its own plan, as on several nodes); (the instant, each one's due
    instant, each one's fire instant: for a webhook, when its delivery is visible)."""
    clock.set(ms("2027-05-03T10:00"))
    at = ms("2027-05-03T10:05")
    t.queues.create_queue("orders")
    t.limits.set("webhook:hooks.example" if webhook else "queue:orders", rate=rate)
    due = {}
    for i in range(n):
        target = (Target(TargetKind.WEBHOOK, "https://hooks.example/in",
                         input=json.dumps({"i": i})) if webhook
                  else Target(TargetKind.QUEUE, "orders", input=json.dumps({"i": i})))
        s = t.schedules.create(ScheduleSpec(f"s{i}", "at(2027-05-03T10:05:00)", target,
                                            flexible_window_minutes=WINDOW_MIN))
        assert s.due_at is not None and at <= s.due_at < at + WINDOW_MS
        due[i] = s.due_at
    bridge = Bridge(1)
    book = LimitBook(t.store, clock, bridge)
    book.refresh()
    ensure_internal_queues(t.queues)
    dispatchers = [Dispatcher(t.schedules, t.queues, t.store, clock, t.notifier, bridge,
                              book=book, batch=50) for _ in range(nodes)]
    passes = 0
    while (nxt := t.store.next_due_at()) is not None:
        clock.set(max(nxt, clock.now_ms()))
        dispatchers[passes % nodes].fire_due()
        passes += 1
        assert passes < 20 * n, "the firings keep coming back"
    bridge.close()
    fired: dict[int, int] = {}
    if webhook:
        token = None
        while True:
            views, token = t.queues.peek(DELIVERY_QUEUE, limit=1000, next_token=token)
            for v in views:
                i = json.loads(json.loads(v.message.body)["input"])["i"]
                assert i not in fired  # once each
                fired[i] = v.message.visible_at
            if token is None:
                return at, due, fired
    while got := t.queues.receive("orders", 10, wait_s=0):
        for m in got:
            i = json.loads(m.body)["i"]
            assert i not in fired  # once each
            fired[i] = m.sent_at
            t.queues.delete("orders", m.receipt_handle)
    return at, due, fired


def test_a_burst_fits_inside_its_window_at_the_limits_rate(t: Tidings,
                                                            clock: FrozenClock) -> None:
    before = counted("tidings_limit_past_window_firings")
    held = counted("tidings_limit_held_firings")
    at, due, fired = burst(t, clock, 300, "10/s")  # the window holds 600 at 10/s
    assert sorted(fired) == list(range(300))  # none lost
    assert all(due[i] <= fired[i] < at + WINDOW_MS for i in fired)  # inside the window
    assert busiest(list(fired.values()), 1000) <= 10  # never above the rate
    assert counted("tidings_limit_past_window_firings") == before
    assert counted("tidings_limit_held_firings") - held <= 300  # each at most once


def test_what_the_window_cannot_hold_fires_after_it_as_early_as_the_limit_allows(
        t: Tidings, clock: FrozenClock) -> None:
    before = counted("tidings_limit_past_window_firings")
    held = counted("tidings_limit_held_firings")
    at, due, fired = burst(t, clock, 1000, "10/s")  # 600 fit in the window
    assert sorted(fired) == list(range(1000))  # none lost, none dropped
    instants = sorted(fired.values())
    assert busiest(instants, 1000) <= 10
    inside = sum(1 for v in instants if v < at + WINDOW_MS)
    assert inside >= 580  # the window is used at (nearly) the rate
    late = len(instants) - inside
    # the rest leave after the window at the rate: 1000 at 10/s take about 100 s
    assert instants[-1] <= at + 1000 * 100 + 2_000
    assert all(fired[i] >= due[i] for i in fired)
    assert counted("tidings_limit_past_window_firings") - before == late > 0
    # planned, not retried: each held back at most once (retried each time the key
    # freed a start, as a firing without a window is, this burst was refused 24,000 times)
    assert counted("tidings_limit_held_firings") - held <= 1000


def test_a_webhook_burst_reaches_the_delivery_queue_spread_at_the_hosts_rate(
        t: Tidings, clock: FrozenClock) -> None:
    before = counted("tidings_limit_past_window_firings", "webhook")
    at, due, visible = burst(t, clock, 1000, "10/s", webhook=True)
    assert sorted(visible) == list(range(1000))  # one delivery each
    instants = sorted(visible.values())
    assert busiest(instants, 1000) <= 10  # they reach the consumers at the host's rate
    assert all(visible[i] >= due[i] for i in visible)
    inside = sum(1 for v in instants if v < at + WINDOW_MS)
    assert inside >= 580 and instants[-1] <= at + 1000 * 100 + 2_000
    assert counted("tidings_limit_past_window_firings", "webhook") - before \
        == len(instants) - inside > 0


def test_two_nodes_plans_never_exceed_the_limit_together(t: Tidings,
                                                         clock: FrozenClock) -> None:
    """Each node plans for the key on its own; the limit's row grants the starts, so the
    plans together may be refused more often, but never start above the rate."""
    at, due, fired = burst(t, clock, 800, "10/s", nodes=2)
    assert sorted(fired) == list(range(800))  # none lost, none fired twice
    instants = sorted(fired.values())
    assert busiest(instants, 1000) <= 10
    assert all(fired[i] >= due[i] for i in fired)
    assert sum(1 for v in instants if v < at + WINDOW_MS) >= 580
