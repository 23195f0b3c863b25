"""Push subscriptions, their in-flight slots and recent failures: the `PushStore` part of
`SqlStore` (SQL in `sql/<backend>/push.sql`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tidings.errors import ConflictError
from tidings.model.push import Subscription, SubscriptionFailure, SubscriptionNotFound
from tidings.model.push import SubscriptionState as State
from tidings.model.receipts import Receipt
from tidings.notify.base import SUBSCRIPTIONS_CHANNEL
from tidings.store.contract.push import NewSubscription, SlotClaim
from tidings.store.driver import Conn
from tidings.store.sqlbase import SqlBase


def subscription(row: Any) -> Subscription:
    return Subscription(
        id=int(row[0]), queue_id=int(row[1]), endpoint=row[2], concurrency=int(row[3]),
        rate_per_s=None if row[4] is None else int(row[4]) / 3600, timeout_ms=int(row[5]),
        state=State(row[6]), secret=row[7], previous_secret=row[8], previous_until=row[9],
        created_at=int(row[10]), modified_at=int(row[11]), version=int(row[12]))


def per_hour(rate_per_s: float | None) -> int | None:
    """The rate as stored: whole pushes an hour (an integer column on every backend)."""
    return None if rate_per_s is None else max(round(rate_per_s * 3600), 1)


class SqlPush(SqlBase):
    def create_subscription(self, new: NewSubscription) -> Subscription:
        with self.driver.tx() as conn:
            row = conn.execute(self.q["push_insert"], {
                "queue": new.queue_id, "endpoint": new.endpoint,
                "concurrency": new.concurrency, "rate": per_hour(new.rate_per_s),
                "timeout": new.timeout_ms, "state": new.state, "secret": new.secret,
                "now": new.now}).fetchone()
            if row is None:
                raise ConflictError("the queue already has a push subscription: update it, "
                                    "or delete it first")
            self._add_slots(conn, int(row[0]), new.concurrency)
            self.driver.notify(conn, SUBSCRIPTIONS_CHANNEL)
            return subscription(conn.execute(self.q["push_get"], (new.queue_id,)).fetchone())

    def _add_slots(self, conn: Conn, subscription_id: int, concurrency: int) -> None:
        for slot in range(concurrency):
            conn.execute(self.q["push_add_slot"], (subscription_id, slot))

    def get_subscription(self, queue_id: int) -> Subscription:
        return subscription(self._found("push_get", (queue_id,), SubscriptionNotFound,
                                        str(queue_id)))

    def list_subscriptions(self) -> list[Subscription]:
        return [subscription(r) for r in self._all("push_list")]

    def update_subscription(self, changed: Subscription, now: int) -> Subscription:
        s = changed
        with self.driver.tx() as conn:
            done = conn.execute(self.q["push_update"], {
                "endpoint": s.endpoint, "concurrency": s.concurrency,
                "rate": per_hour(s.rate_per_s),
                "timeout": s.timeout_ms, "state": s.state.value,
                "secret": s.secret, "previous_secret": s.previous_secret,
                "previous_until": s.previous_until, "now": now, "id": s.id,
                "version": s.version}).rowcount
            if not done:
                raise ConflictError("the push subscription changed meanwhile: read it again")
            self._add_slots(conn, s.id, s.concurrency)
            self.driver.notify(conn, SUBSCRIPTIONS_CHANNEL)
            return subscription(conn.execute(self.q["push_get"], (s.queue_id,)).fetchone())

    def delete_subscription(self, queue_id: int) -> bool:
        with self.driver.tx() as conn:
            row = conn.execute(self.q["push_delete"], (queue_id,)).fetchone()
            if row is None:
                return False
            conn.execute(self.q["push_delete_slots"], (row[0],))
            conn.execute(self.q["push_delete_failures"], (row[0],))
            self.driver.notify(conn, SUBSCRIPTIONS_CHANNEL)
            return True

    def _slot_args(self, claim: SlotClaim) -> dict[str, Any]:
        return {"sub": claim.subscription_id, "holder": claim.holder,
                "concurrency": claim.concurrency, "until": claim.until, "now": claim.now}

    def claim_slots(self, claim: SlotClaim, want: int) -> list[int]:
        if want <= 0:
            return []
        with self.driver.auto() as conn:
            found = conn.execute(self.q["push_claim_slots"],
                                 {**self._slot_args(claim), "want": want}).fetchall()
        return sorted(int(r[0]) for r in found)

    def renew_slots(self, claim: SlotClaim) -> list[int]:
        with self.driver.auto() as conn:
            found = conn.execute(self.q["push_renew_slots"], self._slot_args(claim)).fetchall()
        return sorted(int(r[0]) for r in found)

    def release_slots(self, subscription_id: int, holder: str, slots: Sequence[int]) -> None:
        if not slots:
            return
        with self.driver.auto() as conn:
            conn.execute(self.q["push_release_slots"], {
                "sub": subscription_id, "holder": holder,
                "slots": self.driver.array(list(slots))})

    def return_messages(self, queue_id: int, receipts: Sequence[Receipt],
                        visible_at: int) -> list[bool]:
        out = []
        with self.driver.tx() as conn:
            for r in receipts:
                out.append(bool(conn.execute(self.q["push_return_message"], {
                    "visible": visible_at, "id": r.row_id, "queue": queue_id,
                    "token": r.lease_token}).rowcount))
        return out

    def record_push_failures(self, subscription_id: int,
                             failures: Sequence[SubscriptionFailure], keep: int) -> None:
        if not failures:
            return
        with self.driver.tx() as conn:
            for f in failures:
                conn.execute(self.q["push_add_failure"], (subscription_id, f.at, f.message_id,
                                                          f.status, f.error[:1000]))
            conn.execute(self.q["push_trim_failures"], {"sub": subscription_id,
                                                        "keep": keep})

    def push_failures(self, subscription_id: int, limit: int) -> list[SubscriptionFailure]:
        return [SubscriptionFailure(int(r[0]), r[1], r[2], r[3])
                for r in self._all("push_failures", (subscription_id, limit))]
