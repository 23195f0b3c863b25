"""`Pushers`: the service every node runs for push subscriptions. It reads the
subscriptions when a change anywhere wakes it (`SUBSCRIPTIONS_CHANNEL`: the store
notifies it in the transaction that creates, changes or deletes one, on every node of the
database), and at the latest every `TIDINGS_POLL_FALLBACK_S`, what a lost wake-up can
cost; idle, it reads nothing in between. It keeps one `SubscriptionPusher` per active one (each
its own task, so a slow endpoint holds back only its own queue), started, updated and
stopped as they change. If a pusher dies of anything but the database being away, the
service dies with it, and the node stops loudly."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid

from tidings.errors import QueueNotFound, StoreUnavailable
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
                 refresh_s: float = POLL_FALLBACK_S, health: Health | None = None) -> None:
        queues = push.queues
        holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.ctx = PushContext(
            store=push.store, ops=queues.ops, clock=push.clock, bridge=bridge,
            notifier=queues.notifier, sender=PushSender(guard or push.guard),
            outcomes=Outcomes(push.store, bridge, queues.notifier), holder=holder,
            retries=retries or Retries(), limits=PushLimits(push.store, push.clock, bridge),
            health=health)
        self.push = push
        self.grace_s = grace_s
        self.refresh_s = refresh_s
        self.health = health
        self.pushers: dict[int, tuple[SubscriptionPusher, asyncio.Task[None]]] = {}
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        backoff = Backoff(health=self.health, component="pushers")
        try:
            notifier = self.ctx.notifier
            while not self._stopping.is_set():
                # Taken before the read: a change committed after it wakes the wait below.
                seen = notifier.version(SUBSCRIPTIONS_CHANNEL)
                try:
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

    def stop(self) -> None:
        self._stopping.set()
