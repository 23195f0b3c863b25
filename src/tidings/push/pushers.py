"""`Pushers`: the service every node runs for push subscriptions. It reads the
subscriptions when a change anywhere wakes it (`SUBSCRIPTIONS_CHANNEL`: the store
notifies it in the transaction that creates, changes or deletes one, on every node of the
database), and at the latest every `TIDINGS_POLL_FALLBACK_S`, what a lost wake-up can
cost; idle, it reads nothing in between. It keeps one `SubscriptionPusher` per active one (each
its own task, so a slow endpoint holds back only its own queue), started, updated and
stopped as they change. Their limits are the node's one `LimitBook` (`push/limit.py`);
without one (a test's pushers) the service runs a book of its own. If a pusher dies of
anything but the database being away, the service dies with it, and the node stops
loudly."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid

from tidings.errors import QueueNotFound, StoreUnavailable
from tidings.limits.book import LimitBook
from tidings.model.push import Subscription, SubscriptionState
from tidings.notify.base import POLL_FALLBACK_S, SUBSCRIPTIONS_CHANNEL
from tidings.push.limit import PushLimits
from tidings.push.outcomes import Outcomes
from tidings.push.pusher import PushContext, Retries, SubscriptionPusher
from tidings.push.sender import PushSender
from tidings.push.service import PushService
from tidings.runtime.backoff import Backoff
from tidings.runtime.bridge import Bridge
from tidings.runtime.health import Health
from tidings.runtime.waits import first_of
from tidings.targets.guard import WebhookGuard

log = logging.getLogger("tidings.push")



class Pushers:
    def __init__(self, push: PushService, bridge: Bridge, *, guard: WebhookGuard | None = None,
                 grace_s: float = 10.0, retries: Retries | None = None,
                 refresh_s: float = POLL_FALLBACK_S, health: Health | None = None,
                 book: LimitBook | None = None) -> None:
        """`book`: the node's limit book, which the node runs (None: one of its own)."""
        queues = push.queues
        self.own_book = book is None
        self.book = book or LimitBook(push.store, push.clock, bridge, queues.notifier,
                                      fallback_s=refresh_s)
        limits = PushLimits(self.book, push.store, bridge, queues.notifier)
        limits.watch(self._limits_changed)
        holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.ctx = PushContext(
            store=push.store, ops=queues.ops, clock=push.clock, bridge=bridge,
            notifier=queues.notifier, sender=PushSender(guard or push.guard),
            outcomes=Outcomes(push.store, bridge, queues.notifier), holder=holder,
            retries=retries or Retries(), limits=limits,
            health=health)
        self.push = push
        self.grace_s = grace_s
        self.refresh_s = refresh_s
        self.health = health
        self.pushers: dict[int, tuple[SubscriptionPusher, asyncio.Task[None]]] = {}
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        backoff = Backoff(health=self.health, component="pushers")
        book = (asyncio.create_task(self.book.run(), name="push limits")
                if self.own_book else None)
        try:
            notifier = self.ctx.notifier
            while not self._stopping.is_set():
                # Taken before the read: a change committed after it wakes the wait below.
                seen = notifier.version(SUBSCRIPTIONS_CHANNEL)
                try:
                    if not self.book.reads:  # the first pushes already see the limits
                        await self.ctx.bridge.run(self.book.refresh)
                    await self.refresh()
                    backoff.reset()
                except StoreUnavailable as exc:
                    await backoff.wait(log, "pushers", exc, self._stopping)
                    continue
                for _, task in list(self.pushers.values()):
                    if task.done() and task.exception() is not None:
                        raise RuntimeError("a pusher died") from task.exception()
                await first_of(notifier.wait(SUBSCRIPTIONS_CHANNEL, seen, self.refresh_s),
                               self._stopping.wait())
        finally:
            if book is not None:
                self.book.stop()
                await book
            for pusher, _ in self.pushers.values():
                pusher.stop()
            await asyncio.gather(*(t for _, t in self.pushers.values()),
                                 return_exceptions=True)
            await self.ctx.sender.close()

    async def refresh(self) -> None:
        """Start, update and stop pushers to match the subscriptions as stored."""
        subs: list[Subscription] = await self.ctx.bridge.run(self.ctx.store.list_subscriptions)
        wanted = {s.id: s for s in subs if s.state is SubscriptionState.ACTIVE}
        for sub_id in list(self.pushers):
            if sub_id not in wanted:
                pusher, _ = self.pushers.pop(sub_id)
                pusher.stop()
        for sub_id, sub in wanted.items():
            try:
                queue = await self.ctx.bridge.run(self.ctx.store.get_queue_by_id, sub.queue_id)
            except QueueNotFound:  # deleted (its subscription with it) since the listing
                if sub_id in self.pushers:
                    self.pushers.pop(sub_id)[0].stop()
                continue
            if sub_id in self.pushers:
                self.pushers[sub_id][0].update(queue, sub)
                continue
            pusher = SubscriptionPusher(queue, sub, self.ctx)
            task = asyncio.create_task(pusher.run(self.grace_s), name=f"pusher {queue.name}")
            self.pushers[sub_id] = (pusher, task)

    def _limits_changed(self, queue: str) -> None:
        """A change of `push:<queue>`'s limit (of every queue's, for ""): its pusher looks
        again now."""
        for pusher, _ in self.pushers.values():
            if not queue or pusher.queue.name == queue:
                pusher.changed.set()

    def stop(self) -> None:
        self._stopping.set()
