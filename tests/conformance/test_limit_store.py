"""Downstream limits on every backend: the sliding window, concurrency slots as leases,
bursts, pauses, and a held-back message that does not count as a receive."""

from __future__ import annotations

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.jobs.batches import Jobs
from tidings.model.limits import LimitSetting, Rate
from tidings.store.contract.limits import HeldBack, KeyRule, LimitClaim


def claims(rule: KeyRule, n: int, lease_until: int = 10**15, tag: str = "h") -> list[LimitClaim]:
    return [LimitClaim(f"{tag}{i}", (rule,), lease_until) for i in range(n)]


def granted(answers: list) -> int:  # type: ignore[type-arg]
    return sum(a.granted for a in answers)


def test_a_rate_is_a_sliding_window(t: Tidings, clock: FrozenClock) -> None:
    rule = KeyRule("api", Rate(5, 1000), None, None)
    now = clock.now_ms()
    first = t.store.acquire_limits(claims(rule, 3), now)
    assert granted(first) == 3
    later = t.store.acquire_limits(claims(rule, 4, tag="b"), now + 600)
    assert [a.granted for a in later] == [True, True, False, False]
    # the refused look again when the window frees a start: the first three leave at +1000
    assert later[2].retry_at == now + 1000 and later[3].retry_at == now + 1000
    assert granted(t.store.acquire_limits(claims(rule, 5, tag="c"), now + 999)) == 0
    assert granted(t.store.acquire_limits(claims(rule, 5, tag="d"), now + 1000)) == 3
    assert granted(t.store.acquire_limits(claims(rule, 5, tag="e"), now + 1600)) == 2


def test_concurrency_slots_are_leases(t: Tidings, clock: FrozenClock) -> None:
    rule = KeyRule("export:c1", None, None, 2, name="export")
    now = clock.now_ms()
    assert granted(t.store.acquire_limits(claims(rule, 3, lease_until=now + 30_000), now)) == 2
    assert granted(t.store.acquire_limits(claims(rule, 1, tag="x"), now + 10)) == 0
    t.store.release_limit_slots([("export:c1", "h0")])
    assert granted(t.store.acquire_limits(claims(rule, 2, tag="y"), now + 20)) == 1
    # h1 was never given back (its node died): its lease runs out, the slot is free
    t.store.extend_limit_slots([("export:c1", "y0")], now + 60_000)
    assert granted(t.store.acquire_limits(claims(rule, 2, tag="z"), now + 29_999)) == 0
    assert granted(t.store.acquire_limits(claims(rule, 2, tag="w"), now + 30_000)) == 1
    slots, _ = t.store.limit_usage(now + 30_000, 0)
    assert slots == {"export:c1": 2}


def test_a_claim_needs_every_key(t: Tidings, clock: FrozenClock) -> None:
    now = clock.now_ms()
    shared = KeyRule("all", None, None, 1)
    tenant = KeyRule("t:a", Rate(10, 1000), None, None, name="t")
    answers = t.store.acquire_limits([LimitClaim("j1", (tenant, shared), now + 9999),
                                      LimitClaim("j2", (tenant, shared), now + 9999)], now)
    assert [a.granted for a in answers] == [True, False]
    # the refused claim took no start of the tenant's rate
    _, starts = t.store.limit_usage(now, now - 1)
    assert starts["t:a"][0] == 1


def test_a_burst_is_a_bucket(t: Tidings, clock: FrozenClock) -> None:
    rule = KeyRule("b", Rate(10, 1000), 3, None)
    now = clock.now_ms()
    assert granted(t.store.acquire_limits(claims(rule, 5), now)) == 3
    assert granted(t.store.acquire_limits(claims(rule, 5, tag="x"), now + 100)) == 1
    assert granted(t.store.acquire_limits(claims(rule, 5, tag="y"), now + 350)) == 2


def test_pauses_of_a_key_and_of_its_name(t: Tidings, clock: FrozenClock) -> None:
    now = clock.now_ms()
    rule = KeyRule("export:c1", None, None, 5, name="export")
    t.store.pause_limit("export:c1", now + 500, extend=True)
    t.store.pause_limit("export:c1", now + 200, extend=True)  # an earlier one: stands
    answer = t.store.acquire_limits(claims(rule, 1), now)[0]
    assert not answer.granted and answer.paused and answer.retry_at == now + 500
    t.store.pause_limit("export:c1", None, extend=False)
    t.store.pause_limit("export", now + 700, extend=False)
    assert t.store.acquire_limits(claims(rule, 1), now)[0].retry_at == now + 700
    assert t.store.limit_pauses(now) == {"export": now + 700}
    assert granted(t.store.acquire_limits(claims(rule, 1), now + 700)) == 1


def test_settings_are_stored_and_replaced(t: Tidings, clock: FrozenClock) -> None:
    now = clock.now_ms()
    t.store.put_limits([LimitSetting("api", Rate(200, 1000), None, 10, "code", now),
                        LimitSetting("api:big", None, None, 50, "set", now)])
    t.store.put_limits([LimitSetting("api", Rate(100, 60_000), 5, None, "set", now + 1)])
    got = {s.key: s for s in t.store.limit_settings()}
    assert got["api"] == LimitSetting("api", Rate(100, 60_000), 5, None, "set", now + 1)
    assert got["api:big"].concurrency == 50
    assert t.store.delete_limit("api:big") and not t.store.delete_limit("api:big")


def test_a_held_back_message_keeps_its_receive_count(t: Tidings, clock: FrozenClock) -> None:
    q, jobs = t.queues, Jobs(t.queues)
    rec = q.create_queue("jobs", visibility_timeout_s=30)
    q.send("jobs", '{"type": "x", "id": 1}')
    for _ in range(3):
        (held,) = jobs.receive(rec, 10)
        assert held.message.receive_count == 1
        now = clock.now_ms()
        assert t.store.hold_back_messages(rec.id, [HeldBack(held.receipt, now + 5000)],
                                          now) == [True]
        assert jobs.receive(rec, 10) == []
        # a stale receipt changes nothing
        assert t.store.hold_back_messages(rec.id, [HeldBack(held.receipt, now)], now) == [False]
        clock.advance(5000)


def test_a_held_back_message_comes_back_at_once_when_its_limit_changes(
        t: Tidings, clock: FrozenClock) -> None:
    q, jobs = t.queues, Jobs(t.queues)
    rec = q.create_queue("jobs", visibility_timeout_s=30)
    q.send("jobs", '{"type": "x", "id": 1}')
    (held,) = jobs.receive(rec, 10)
    now = clock.now_ms()
    t.store.hold_back_messages(rec.id, [HeldBack(held.receipt, now + 60_000)], now)
    assert jobs.receive(rec, 10) == []
    found = (held.receipt.row_id, held.receipt.lease_token)
    assert t.store.wake_held_back(rec.id + 1, [found], now) == 0  # another queue's id
    assert t.store.wake_held_back(rec.id, [found], now) == 1
    (again,) = jobs.receive(rec, 10)
    assert again.message.receive_count == 1  # the hold still cost no attempt
    # received since: the old receipt no longer finds it, and a leased message stays leased
    assert t.store.wake_held_back(rec.id, [found], now) == 0
    assert jobs.receive(rec, 10) == []


def test_the_sweep_forgets_starts_and_slots_no_window_needs(t: Tidings, clock: FrozenClock) -> None:
    now = clock.now_ms()
    rule = KeyRule("k", Rate(2, 1000), None, 1)
    assert granted(t.store.acquire_limits(claims(rule, 1, lease_until=now + 500), now)) == 1
    assert t.store.forget_limit_rows(now - 1000, now) == 0  # still in its window and lease
    assert t.store.forget_limit_rows(now + 1, now + 500) == 2
    assert t.store.limit_usage(now, 0) == ({}, {})
