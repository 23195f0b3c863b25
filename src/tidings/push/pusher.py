"""One subscription's pusher on one node: leases messages from its queue exactly as a
consumer does (`QueueOps.lease`: the visibility timeout, the receive count, the move to
the dead-letter queue at maxReceiveCount), only as many as it holds free in-flight slots
(`push/slots.py`) and its rate allows, POSTs each to the endpoint, and writes the outcome
in group commits (`push/outcomes.py`).

- a 2xx deletes the message;
- a failure, a timeout or another status makes it visible again after the backoff, the
  status and the start of the answer recorded as its error (what the dead-letter queue
  shows once maxReceiveCount is reached);
- a 429 or 503 with Retry-After pauses the subscription's limit key until then (every
  node: `push/limit.py`) and gives the message back uncounted: the endpoint asked for
  time, no attempt was spent;
- FIFO queues: the messages of a group go one at a time, in order; after a failure the
  rest of the group's batch goes back uncounted (the failed one's lease keeps the group
  blocked until its retry, so the order holds).

Receives are batched: a push that ends wakes the loop only once half the slots (at
least one) are free, or none is busy, so a busy subscription leases its messages by
the dozen, not one per ended push; a message sent meanwhile wakes it at once.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from tidings.clock import Clock
from tidings.errors import StoreUnavailable
from tidings.model.messages import StoredMessage
from tidings.model.push import Subscription, SubscriptionFailure
from tidings.model.queues import QueueRecord
from tidings.notify.base import Notifier, queue_channel
from tidings.push import metrics
from tidings.push.limit import Allowed, PushLimits
from tidings.push.outcomes import Outcomes
from tidings.push.request import headers
from tidings.push.sender import PushSender
from tidings.push.slots import Slots
from tidings.queues.ops import QueueOps
from tidings.runtime.backoff import Backoff
from tidings.runtime.bridge import Bridge
from tidings.runtime.health import Health
from tidings.store.base import Store, VisibilityChange

log = logging.getLogger("tidings.push")

#: An idle queue is looked at again after this long (a notification wakes it at once).
POLL_S = 1.0
#: Slots are given back once the queue has been empty this long (not at once: a queue
#: fed a message at a time would claim and give back its slots for each one).
KEEP_SLOTS_IDLE_S = 2.0
#: A message an endpoint's Retry-After sent back is visible again after this long (at the
#: latest when the pause ends): the other nodes have read the pause by then (`push/limit.py`).
VISIBLE_AGAIN_MS = 1000
#: A lease lasts at least the push's timeout plus this margin.
LEASE_MARGIN_S = 5


@dataclass(frozen=True)
class Retries:
    """The backoff after a failed push: exponential with equal jitter, as consumers'."""

    base_s: float = 1.0
    max_s: float = 900.0

    def delay_ms(self, attempt: int) -> int:
        ceiling = min(self.max_s, self.base_s * 2 ** max(attempt - 1, 0))
        return max(int((ceiling / 2 + random.uniform(0, ceiling / 2)) * 1000), 0)


@dataclass(frozen=True)
class PushContext:
    """What every subscription's pusher on a node shares."""

    store: Store
    ops: QueueOps
    clock: Clock
    bridge: Bridge
    notifier: Notifier
    sender: PushSender
    outcomes: Outcomes
    holder: str  # this node, as the slots table names it
    retries: Retries
    limits: PushLimits
    health: Health | None = None


class Bucket:
    """The rate: tokens at `rate` a second, at most a second's worth saved up."""

    def __init__(self) -> None:
        self.tokens = 1.0
        self.at = time.monotonic()

    def available(self, rate: float | None) -> int:
        if rate is None:
            return 1 << 30
        now = time.monotonic()
        self.tokens = min(max(rate, 1.0), self.tokens + (now - self.at) * rate)
        self.at = now
        return int(self.tokens)

    def take(self, n: int) -> None:
        self.tokens -= n

    @staticmethod
    def wait_s(rate: float) -> float:
        return 1.0 / rate


class SubscriptionPusher:
    def __init__(self, queue: QueueRecord, sub: Subscription, ctx: PushContext) -> None:
        self.queue = queue
        self.sub = sub
        self.ctx = ctx
        self.slots = Slots(ctx.store, ctx.clock, ctx.bridge, ctx.holder, sub.id)
        self.bucket = Bucket()
        self.stopping = asyncio.Event()
        self.changed = asyncio.Event()  # a push ended, or the subscription changed
        self.in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._seen = 0  # the queue channel's version before the last look
        self._busy_at = 0.0  # when the last receive found messages (monotonic)
        self._wake_at = 1  # free slots at which an ended push wakes the loop
        self._gauge = metrics.IN_FLIGHT.labels(queue.name)
        self._pushed = metrics.PUSHED.labels(queue.name)
        self._latency = metrics.LATENCY.labels(queue.name)

    def update(self, queue: QueueRecord, sub: Subscription) -> None:
        """The subscription as last read (a pause its resume lifted reaches the node's
        limit book on the `limits` channel, which wakes this pusher again)."""
        self.queue, self.sub = queue, sub
        self.changed.set()

    def stop(self) -> None:
        self.stopping.set()
        self.changed.set()

    async def run(self, grace_s: float) -> None:
        try:
            await self._push_until_stopped()
        finally:
            await self._finish(grace_s)

    async def _push_until_stopped(self) -> None:
        ctx = self.ctx
        backoff = Backoff(health=ctx.health, component=f"pusher of {self.queue.name}")
        while not self.stopping.is_set():
            try:
                idle_s = await self._step()
                backoff.reset()
            except StoreUnavailable as exc:
                await backoff.wait(log, f"pusher of {self.queue.name}", exc, self.stopping)
                continue
            if idle_s is not None:
                await self._wait(idle_s)

    async def _step(self) -> float | None:
        """Lease and start what there is room for; how long to wait before the next look
        (None: look again at once)."""
        # Cleared before anything is read: a push that ends from here on wakes the wait
        # that may follow (cleared later, its wake-up could be lost for POLL_S).
        self.changed.clear()
        ctx, queue = self.ctx, self.queue
        now = ctx.clock.now_ms()
        if not self.slots.count():
            # Idle: a read says whether there is anything to push before the limits are
            # read, slots claimed and a receive tried (writes), so an empty queue costs
            # one read.
            self._seen = ctx.notifier.version(queue_channel(queue.id))
            counts = await ctx.bridge.run(ctx.store.queue_counts, queue.id, now)
            if not counts.visible:
                return await self._pause()
        allowed = ctx.limits.allowed(queue.name, self.sub)
        if allowed.paused_until:
            await self._quiet()
            # looked at again within POLL_S: an operator may lift the pause
            return min(max(allowed.paused_until - ctx.clock.now_ms(), 1) / 1000, POLL_S)
        concurrency = allowed.concurrency
        await self.slots.keep(concurrency, concurrency)
        held = self.slots.count()
        self._wake_at = max(held // 2, 1)
        room = held - self.in_flight
        if room <= 0:  # every slot busy (woken when a push ends), or none to be had
            return POLL_S if held else POLL_S / 4
        node_rate = self._node_rate(allowed, held)
        room = min(room, self.bucket.available(node_rate))
        if room <= 0:
            assert node_rate is not None
            return Bucket.wait_s(node_rate)
        channel = queue_channel(queue.id)
        self._seen = ctx.notifier.version(channel)
        visibility_s = max(queue.attributes.visibility_timeout_s,
                           math.ceil(self.sub.timeout_ms / 1000) + LEASE_MARGIN_S)
        got = await ctx.bridge.run(ctx.ops.lease, queue, room, visibility_s)
        if got:
            self._busy_at = time.monotonic()
            self.bucket.take(len(got))
            self._start(got)
            return None
        if not self.in_flight and time.monotonic() - self._busy_at >= KEEP_SLOTS_IDLE_S:
            await self.slots.release()
        return await self._pause()

    @staticmethod
    def _node_rate(allowed: Allowed, held: int) -> float | None:
        """This node's share of the rate: as its share of the slots."""
        if allowed.rate_per_s is None:
            return None
        return allowed.rate_per_s * held / allowed.concurrency

    async def _pause(self) -> float:
        """How long an empty queue waits: until its next delayed or leased message is
        visible, at most POLL_S (no notification comes when a delay ends)."""
        ctx = self.ctx
        nxt = await ctx.bridge.run(ctx.store.next_visible_at, self.queue.id,
                                   ctx.clock.now_ms())
        return POLL_S if nxt is None else min(POLL_S, max(nxt - ctx.clock.now_ms(), 1) / 1000)

    async def _quiet(self) -> None:
        """Held back: give the slots to no one else's harm (they are released)."""
        if not self.in_flight:
            await self.slots.release()

    async def _wait(self, timeout_s: float) -> None:
        """Until a push ends, the subscription changes, a message arrives, or the timeout
        (`changed` was cleared when the step before it began)."""
        channel = queue_channel(self.queue.id)
        waits = [asyncio.ensure_future(self.changed.wait()),
                 asyncio.ensure_future(self.ctx.notifier.wait(
                     channel, self._seen, timeout_s))]
        try:
            await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    def _start(self, got: list[StoredMessage]) -> None:
        self.in_flight += len(got)
        self._gauge.inc(len(got))
        if not self.queue.attributes.fifo:
            for m in got:
                self._spawn(self._push_one(m))
            return
        groups: dict[str | None, list[StoredMessage]] = {}
        for m in got:
            groups.setdefault(m.group_id, []).append(m)
        for messages in groups.values():
            self._spawn(self._push_group(messages))

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # Its message comes back when its lease runs out; say why it was not pushed.
            log.error("a push to %s failed unexpectedly", self.sub.endpoint,
                      exc_info=task.exception())

    def _done(self, n: int = 1) -> None:
        self.in_flight -= n
        self._gauge.dec(n)
        if self.slots.count() - self.in_flight >= self._wake_at or not self.in_flight:
            self.changed.set()

    async def _push_one(self, m: StoredMessage) -> None:
        try:
            await self._push(m)
        finally:
            self._done()

    async def _push_group(self, messages: list[StoredMessage]) -> None:
        """A FIFO group's messages of this batch, one at a time, in order."""
        ctx, queue = self.ctx, self.queue
        left = len(messages)
        try:
            for i, m in enumerate(messages):
                if i:  # its lease ran while the ones before it were pushed: renew it
                    now = ctx.clock.now_ms()
                    until = now + max(queue.attributes.visibility_timeout_s,
                                      math.ceil(self.sub.timeout_ms / 1000) + LEASE_MARGIN_S
                                      ) * 1000
                    kept = await ctx.bridge.run(ctx.store.change_visibility, queue.id,
                                                [VisibilityChange(m.receipt(queue.id), until)],
                                                now)
                    if not kept[0]:
                        return  # the lease ran out and someone else has the group now
                ok = await self._push(m)
                left -= 1
                self._done()
                if not ok and left:
                    ctx.outcomes.give_back(queue.id, [x.receipt(queue.id)
                                                      for x in messages[i + 1:]],
                                           ctx.clock.now_ms())
                    return
        finally:
            if left:
                self._done(left)

    async def _push(self, m: StoredMessage) -> bool:
        ctx, sub, queue = self.ctx, self.sub, self.queue
        now = ctx.clock.now_ms()
        body = m.body.encode()
        started = time.perf_counter()
        answer = await ctx.sender.post(
            sub.endpoint, body, headers(queue.name, m, sub.signing_secrets(now), now, body),
            timeout_s=sub.timeout_ms / 1000, pool=sub.concurrency)
        self._latency.observe(time.perf_counter() - started)
        receipt = m.receipt(queue.id)
        if answer.ok:
            self._pushed.inc()
            ctx.outcomes.acknowledge(queue.id, receipt)
            return True
        metrics.FAILED.labels(queue.name, str(answer.status or "none")).inc()
        now = ctx.clock.now_ms()
        if answer.retry_after_ms is not None:
            # The pause holds the subscription back, on every node once each has read it
            # (within VISIBLE_AGAIN_MS); the message waits no longer than that, so lifting
            # the pause (a resume) lets it go at once.
            until = now + answer.retry_after_ms
            metrics.HELD.labels(queue.name).inc()
            await ctx.limits.pause(queue.name, until)
            ctx.outcomes.give_back(queue.id, [receipt], min(until, now + VISIBLE_AGAIN_MS))
        else:
            ctx.outcomes.retry(queue.id, receipt,
                               now + ctx.retries.delay_ms(m.receive_count), answer.error)
        ctx.outcomes.failed(sub.id, SubscriptionFailure(now, m.message_id, answer.status,
                                                        answer.error))
        return False

    async def _finish(self, grace_s: float) -> None:
        """Shutdown: pushes under way get `grace_s` to end; those cut off come back when
        their lease runs out (at most pushed twice). Outcomes are written, slots freed."""
        if self._tasks:
            _, late = await asyncio.wait(list(self._tasks), timeout=grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        await self.ctx.outcomes.flushed()
        try:
            await self.slots.release()
        except StoreUnavailable:
            pass  # they run out by themselves
