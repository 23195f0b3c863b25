"""The in-flight slots one node holds for one subscription.

A subscription's concurrency is shared by every node: its slots are rows (`push_slots`),
each held by at most one node until its lease runs out, and a node pushes at most as many
messages at once as it holds slots. Slots are claimed when there is work, renewed while
held (every `RENEW_MS`, well inside `SLOT_TTL_MS`) and given back when the queue is empty;
a node that dies loses them when their lease runs out, and its pushes died with it, so
three nodes never push more at once than the subscription's concurrency.
"""

from __future__ import annotations

from tidings.clock import Clock
from tidings.runtime.bridge import Bridge
from tidings.store.base import SlotClaim, Store

SLOT_TTL_MS = 15_000
RENEW_MS = 3_000
#: A node whose last claim came back short asks again at most this often (each ask is a
#: write); one that gave its slots back claims at once when work comes.
CLAIM_EVERY_MS = 250


class Slots:
    def __init__(self, store: Store, clock: Clock, bridge: Bridge, holder: str,
                 subscription_id: int) -> None:
        self.store = store
        self.clock = clock
        self.bridge = bridge
        self.holder = holder
        self.subscription_id = subscription_id
        self.held: list[int] = []
        self._renewed_at = 0
        self._short_at = -CLAIM_EVERY_MS  # when a claim last came back short

    def count(self) -> int:
        return len(self.held)

    def _claim(self, concurrency: int) -> SlotClaim:
        now = self.clock.now_ms()
        return SlotClaim(self.subscription_id, self.holder, concurrency, now + SLOT_TTL_MS, now)

    async def keep(self, concurrency: int, wanted: int) -> None:
        """Renew what is held when due, and ask for more (up to `wanted`, never more than
        the concurrency) when short and the last ask is old enough."""
        now = self.clock.now_ms()
        if self.held and now - self._renewed_at >= RENEW_MS:
            self.held = await self.bridge.run(self.store.renew_slots, self._claim(concurrency))
            self._renewed_at = now
        wanted = min(wanted, concurrency)
        if len(self.held) < wanted and now - self._short_at >= CLAIM_EVERY_MS:
            want = wanted - len(self.held)
            got = await self.bridge.run(self.store.claim_slots, self._claim(concurrency), want)
            if len(got) < want:  # other nodes hold the rest: ask again a little later
                self._short_at = now
            if got:
                if not self.held:  # a fresh hold: as good as renewed now
                    self._renewed_at = now
                self.held = sorted(set(self.held) | set(got))

    async def release(self) -> None:
        if self.held:
            held, self.held = self.held, []
            await self.bridge.run(self.store.release_slots, self.subscription_id,
                                  self.holder, held)
