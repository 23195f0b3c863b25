"""Downstream limits: the `LimitStore` part of `SqlStore`. An acquisition locks each key's
row (`limit_keys`, FOR UPDATE on PostgreSQL; SQLite's one writer serialises anyway), reads
its pause, live slots and the starts still in its window, decides every claim in order in
Python, and writes the starts and slots granted, all in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tidings.model.limits import LimitSetting, Rate
from tidings.notify.base import queue_channel
from tidings.store.contract.limits import HeldBack, KeyRule, LimitAnswer, LimitClaim
from tidings.store.driver import Conn
from tidings.store.sqlbase import SqlBase

#: A refusal for a full concurrency has no exact instant (a slot frees when a job ends):
#: look again this much later.
SLOT_RECHECK_MS = 20


@dataclass(slots=True)
class _Key:
    """A key's state inside one acquisition."""

    rule: KeyRule
    paused_until: int
    tat: int | None
    slots: int
    starts: list[int]  # in the window, oldest first
    tat_changed: bool = False
    new_starts: int = 0
    refused: int = 0  # claims refused so far in this acquisition
    new_slots: list[tuple[str, int]] = field(default_factory=list)

    def free_at(self, now: int) -> int:
        """When this key could take one more claim (0: now), counting the claims already
        refused in this acquisition, so a backlog's retries are spread, not bunched."""
        rule, later = self.rule, 0
        if self.paused_until > now:
            return self.paused_until
        if rule.rate is not None:
            count, period = rule.rate.count, rule.rate.period_ms
            if rule.burst is not None:
                step = period / count
                tat = max(self.tat or now, now)
                allowed_at = int(tat + step - rule.burst * step)
                if allowed_at > now or self.refused:
                    later = max(allowed_at, now) + int(self.refused * step)
            else:
                starts, n = self.starts, len(self.starts)
                if n >= count or self.refused:
                    index = n - count + self.refused
                    if 0 <= index < n:
                        later = starts[index] + period
                    elif index >= n:  # past what the window holds: whole periods later
                        rounds, rest = divmod(index - n, count)
                        base = starts[-1] if starts else now
                        later = base + period * (rounds + 1) + rest * period // count
                    # index < 0: room now
        if rule.concurrency is not None and self.slots >= rule.concurrency:
            wait = SLOT_RECHECK_MS * (1 + self.refused // rule.concurrency)
            later = max(later, now + wait)
        return later

    def take(self, now: int, holder: str, lease_until: int) -> None:
        rule = self.rule
        if rule.rate is not None:
            if rule.burst is not None:
                self.tat = int(max(self.tat or now, now) + rule.rate.period_ms / rule.rate.count)
                self.tat_changed = True
            else:
                self.starts.append(now)
                self.new_starts += 1
        if rule.concurrency is not None:
            self.slots += 1
            self.new_slots.append((holder, lease_until))


def _rate(count: int | None, period: int | None) -> Rate | None:
    return None if count is None or period is None else Rate(int(count), int(period))


class SqlLimits(SqlBase):
    def limit_settings(self) -> list[LimitSetting]:
        return [LimitSetting(r[0], _rate(r[1], r[2]), r[3], r[4], r[5], int(r[6]))
                for r in self._all("limit_settings")]

    def put_limits(self, settings: Sequence[LimitSetting]) -> None:
        with self.driver.tx() as conn:
            for s in settings:
                conn.execute(self.q["put_limit"], (
                    s.key, s.rate.count if s.rate else None,
                    s.rate.period_ms if s.rate else None, s.burst, s.concurrency, s.source,
                    s.updated_at))

    def delete_limit(self, key: str) -> bool:
        with self.driver.auto() as conn:
            return bool(conn.execute(self.q["delete_limit"], (key,)).rowcount)

    def limit_pauses(self, now: int) -> dict[str, int]:
        return {r[0]: int(r[1]) for r in self._all("limit_pauses", (now,))}

    def pause_limit(self, key: str, until: int | None, *, extend: bool) -> None:
        with self.driver.auto() as conn:
            conn.execute(self.q["pause_limit_key" if extend and until is not None
                                else "set_limit_pause"], (key, until))

    def acquire_limits(self, claims: Sequence[LimitClaim], now: int,
                       release: Sequence[tuple[str, str]] = ()) -> list[LimitAnswer]:
        rules: dict[str, KeyRule] = {}
        for claim in claims:
            for rule in claim.rules:
                rules.setdefault(rule.key, rule)
        if not rules:
            self.release_limit_slots(release)
            return [LimitAnswer(True, 0)] * len(claims)
        with self.driver.tx() as conn, self.driver.pipelined(conn):
            # A job that ended gives its slot back in the transaction that gives it to
            # the next: one round trip per turn of a slot, not two.
            for key, holder in release:
                conn.execute(self.q["release_limit_slot"], (key, holder))
            keys = {key: self._load_key(conn, rules[key], now) for key in sorted(rules)}
            answers = [self._decide(claim, keys, now) for claim in claims]
            self._write_keys(conn, keys, now)
        return answers

    def _load_key(self, conn: Conn, rule: KeyRule, now: int) -> _Key:
        """Every statement of the key first, then the answers: in PostgreSQL's pipeline
        mode (`acquire_limits`) that is one round trip per key, not seven, while the
        key's row is locked and the other nodes wait for it."""
        q, key = self.q, rule.key
        conn.execute(q["ensure_limit_key"], (key,))
        locked = conn.execute(q["lock_limit_key"], (key,))
        by_name = (conn.execute(q["limit_key_paused_until"], (rule.name,))
                   if rule.name is not None and rule.name != key else None)
        slots = None
        if rule.concurrency is not None:
            conn.execute(q["expire_limit_slots"], (key, now))
            slots = conn.execute(q["count_limit_slots"], (key,))
        starts = None
        if rule.rate is not None and rule.burst is None:
            conn.execute(q["expire_limit_starts"], (key, now - rule.rate.period_ms))
            starts = conn.execute(q["limit_starts"], (key,))
        in_window = [int(r[0]) for r in starts.fetchall()] if starts is not None else []
        held = int(slots.fetchone()[0]) if slots is not None else 0
        row = by_name.fetchone() if by_name is not None else None
        paused, tat = locked.fetchone()
        paused = int(paused or 0)
        if row is not None and row[0] is not None:
            paused = max(paused, int(row[0]))
        return _Key(rule, paused, None if tat is None else int(tat), held, in_window)

    @staticmethod
    def _decide(claim: LimitClaim, keys: dict[str, _Key], now: int) -> LimitAnswer:
        states = [keys[rule.key] for rule in claim.rules]
        later = max((s.free_at(now) for s in states), default=0)
        if later > now:
            for s in states:
                s.refused += 1
            return LimitAnswer(False, later, any(s.paused_until > now for s in states))
        for s in states:
            s.take(now, claim.holder, claim.lease_until)
        return LimitAnswer(True, 0)

    def _write_keys(self, conn: Conn, keys: dict[str, _Key], now: int) -> None:
        q = self.q
        for key, s in keys.items():
            for _ in range(s.new_starts):
                conn.execute(q["insert_limit_start"], (key, now))
            for holder, until in s.new_slots:
                conn.execute(q["insert_limit_slot"], (key, holder, until))
            if s.tat_changed:
                conn.execute(q["set_limit_tat"], (s.tat, key))

    def release_limit_slots(self, slots: Sequence[tuple[str, str]]) -> None:
        if slots:
            with self.driver.tx() as conn:
                for key, holder in slots:
                    conn.execute(self.q["release_limit_slot"], (key, holder))

    def extend_limit_slots(self, slots: Sequence[tuple[str, str]], until: int) -> None:
        if slots:
            with self.driver.tx() as conn:
                for key, holder in slots:
                    conn.execute(self.q["extend_limit_slot"], (until, key, holder))

    def limit_usage(self, now: int, since: int) -> tuple[dict[str, int],
                                                         dict[str, tuple[int, int]]]:
        slots = {r[0]: int(r[1]) for r in self._all("limit_slots_in_use", (now,))}
        starts = {r[0]: (int(r[1]), int(r[2])) for r in self._all("limit_starts_by_key",
                                                                  (since,))}
        return slots, starts

    def forget_limit_rows(self, before: int, now: int) -> int:
        with self.driver.tx() as conn:
            gone = conn.execute(self.q["forget_limit_rows"], (before,)).rowcount or 0
            gone += conn.execute(self.q["forget_limit_slots"], (now,)).rowcount or 0
        return int(gone)

    def hold_back_messages(self, queue_id: int, items: Sequence[HeldBack],
                           now: int) -> list[bool]:
        with self.driver.tx() as conn:
            done = self.driver.run_each(conn, "hold_back_messages", [
                (h.receipt.row_id, h.receipt.lease_token, h.visible_at, h.error, queue_id,
                 now) for h in items], key=2)
            if any(ok and h.visible_at <= now for ok, h in zip(done, items, strict=True)):
                self.driver.notify(conn, queue_channel(queue_id))
        return done

    def wake_held_back(self, queue_id: int, items: Sequence[tuple[int, int]],
                       now: int) -> int:
        with self.driver.tx() as conn:
            done = sum(self.driver.run_each(conn, "wake_held_back", [
                (row_id, token, queue_id, now) for row_id, token in items], key=2))
            if done:
                self.driver.notify(conn, queue_channel(queue_id))
        return done
