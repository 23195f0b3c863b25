"""What became of each push, written in group commits (`runtime/batching.py`), as a
consumer's acknowledgements are: deletes for 2xx answers, a new visibility and the error
for failures, receives given back uncounted (a Retry-After hold, FIFO followers of a
failure, a shutdown), and the failures the console lists. A write that fails leaves the
message's lease to run out: it comes back, never lost."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from tidings.model.push import SubscriptionFailure
from tidings.model.receipts import Receipt
from tidings.notify.base import Notifier, queue_channel
from tidings.runtime.batching import Batcher
from tidings.runtime.bridge import Bridge
from tidings.store.base import Store, VisibilityChange

log = logging.getLogger("tidings.push")

#: How many failures of each subscription are kept for the console.
KEEP_FAILURES = 50

Returned = tuple[Receipt, int]  # the receipt, visible again at
Told = Sequence[None | BaseException] | BaseException


class Outcomes:
    def __init__(self, store: Store, bridge: Bridge, notifier: Notifier) -> None:
        self.store = store
        self.notifier = notifier
        self._acks: Batcher[int, Receipt, None] = Batcher(
            bridge, self._write_acks, None, on_written=self._logged("acknowledge"))
        self._retries: Batcher[int, VisibilityChange, None] = Batcher(
            bridge, self._write_retries, None, on_written=self._logged("release"))
        self._returns: Batcher[int, Returned, None] = Batcher(
            bridge, self._write_returns, None, on_written=self._returned)
        self._failures: Batcher[int, SubscriptionFailure, None] = Batcher(
            bridge, self._write_failures, None, on_written=self._logged("record"))

    def acknowledge(self, queue_id: int, receipt: Receipt) -> None:
        self._acks.put(queue_id, receipt)

    def retry(self, queue_id: int, receipt: Receipt, visible_at: int, error: str) -> None:
        self._retries.put(queue_id, VisibilityChange(receipt, visible_at, error[:4000]))

    def give_back(self, queue_id: int, receipts: Sequence[Receipt], visible_at: int) -> None:
        """Back to the queue at `visible_at`, the receive not counted as an attempt."""
        self._returns.put_many(queue_id, [(r, visible_at) for r in receipts])

    def failed(self, subscription_id: int, failure: SubscriptionFailure) -> None:
        self._failures.put(subscription_id, failure)

    async def flushed(self) -> None:
        for batcher in (self._acks, self._retries, self._returns, self._failures):
            await batcher.flushed()

    def _write_acks(self, queue_id: int, receipts: Sequence[Receipt]) -> list[None]:
        self.store.delete_messages(queue_id, receipts)
        return [None] * len(receipts)

    def _write_retries(self, queue_id: int, changes: Sequence[VisibilityChange]) -> list[None]:
        # The lease token is the guard: a lease that ran out while its push waited may
        # still be moved if nobody received the message since (its token is unchanged).
        self.store.change_visibility(queue_id, changes, 0)
        return [None] * len(changes)

    def _write_returns(self, queue_id: int, items: Sequence[Returned]) -> list[None]:
        by_instant: dict[int, list[Receipt]] = {}
        for receipt, at in items:
            by_instant.setdefault(at, []).append(receipt)
        for at, receipts in by_instant.items():
            self.store.return_messages(queue_id, receipts, at)
        return [None] * len(items)

    def _write_failures(self, subscription_id: int,
                        failures: Sequence[SubscriptionFailure]) -> list[None]:
        self.store.record_push_failures(subscription_id, failures, KEEP_FAILURES)
        return [None] * len(failures)

    async def _returned(self, queue_id: int, items: list[Returned], outcome: Told) -> None:
        await self._logged("give back")(queue_id, items, outcome)
        self.notifier.notify(queue_channel(queue_id))

    @staticmethod
    def _logged(what: str) -> Callable[[int, list[Any], Told], Awaitable[None]]:
        async def told(key: int, items: list[Any], outcome: Told) -> None:
            if isinstance(outcome, BaseException):
                log.warning("could not %s %d pushes (%s): their leases run out and they "
                            "come back", what, len(items), outcome)
        return told
