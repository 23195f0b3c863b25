"""Templates, the suppression list and the delivery log: the `EmailStore` half of
`SqlStore`. A delivery's state changes only through `update_delivery` and
`record_deliveries`, compare-and-sets checked against `tidings.model.states.DELIVERIES`."""

from __future__ import annotations

import json
from collections.abc import Sequence

from tidings.errors import ConflictError, TemplateNotFound
from tidings.model.email import Delivery, StoredTemplate, Suppression, SuppressionReason
from tidings.model.messages import NewMessage
from tidings.model.states import DELIVERIES, DeliveryState
from tidings.store import rows
from tidings.store.base import DeliveryQuery
from tidings.store.driver import Conn
from tidings.store.sqlbase import SqlBase

NO_SEQ = 2**62  # "before the end": the first page of the delivery log


class SqlEmail(SqlBase):
    # templates --------------------------------------------------------------------------

    def create_template(self, template: StoredTemplate) -> None:
        t = template
        with self.driver.auto() as conn:
            if conn.execute(self.q["insert_template"], (t.name, t.subject, t.html, t.text,
                                                        t.created_at, t.modified_at)
                            ).rowcount == 0:
                raise ConflictError(f"Template {t.name} already exists.")

    def update_template(self, name: str, subject: str, html: str | None, text: str | None,
                        now: int) -> StoredTemplate:
        with self.driver.tx() as conn:
            if conn.execute(self.q["update_template"],
                            (subject, html, text, now, name)).rowcount == 0:
                raise TemplateNotFound(name)
            return rows.template(conn.execute(self.q["template_by_name"], (name,)).fetchone())

    def get_template(self, name: str) -> StoredTemplate:
        return rows.template(self._found("template_by_name", (name,), TemplateNotFound, name))

    def list_templates(self, after: str | None, limit: int) -> list[StoredTemplate]:
        return [rows.template(r) for r in self._all("list_templates", (after or "", limit))]

    def delete_template(self, name: str) -> None:
        with self.driver.auto() as conn:
            if conn.execute(self.q["delete_template"], (name,)).rowcount == 0:
                raise TemplateNotFound(name)

    # suppression list -------------------------------------------------------------------

    def add_suppressions(self, addresses: Sequence[str], reason: SuppressionReason,
                         now: int) -> int:
        with self.driver.tx() as conn:
            return sum(self.driver.run_each(conn, "put_suppression",
                                            [(a, reason.value, now) for a in addresses]))

    def remove_suppression(self, address: str) -> bool:
        with self.driver.auto() as conn:
            return bool(conn.execute(self.q["delete_suppression"], (address,)).rowcount > 0)

    def suppressed_among(self, addresses: Sequence[str]) -> dict[str, Suppression]:
        if not addresses:
            return {}
        found = self._all("suppressed_among", (self.driver.array(addresses),))
        return {r[0]: rows.suppression(r) for r in found}

    def list_suppressions(self, reason: SuppressionReason | None, after: str | None,
                          limit: int) -> list[Suppression]:
        return [rows.suppression(r) for r in self._all("list_suppressions", {
            "after": after or "", "reason": reason.value if reason else None,
            "limit": limit})]

    # delivery log -----------------------------------------------------------------------

    def _insert_delivery(self, conn: Conn, d: Delivery,
                         recipients: list[tuple[str, int]]) -> bool:
        """Insert the row; its recipient rows join `recipients`, which the caller writes
        in one statement for the whole batch (a statement per delivery cost more than
        the rows)."""
        row = conn.execute(self.q["insert_delivery"], (
            d.id, d.message_id, d.execution_id, d.schedule, d.template, d.sender,
            json.dumps(list(d.recipients)), d.state.value, d.detail, d.attempts, d.created_at,
            d.updated_at, d.document)).fetchone()
        if row is None:
            return False
        recipients += [(a.lower(), row[0]) for a in d.recipients]
        return True

    def insert_delivery(self, delivery: Delivery) -> bool:
        recipients: list[tuple[str, int]] = []
        with self.driver.tx() as conn:
            made = self._insert_delivery(conn, delivery, recipients)
            self.driver.run_each(conn, "insert_delivery_recipient", recipients)
        return made

    def record_deliveries(self, deliveries: Sequence[Delivery]) -> list[bool]:
        """A group commit's outcomes: new rows in one statement per batch where the
        database allows (PostgreSQL: a round trip per delivery before), a retry's
        QUEUED row moved by its compare-and-set."""
        out = []
        recipients: list[tuple[str, int]] = []
        with self.driver.tx() as conn:
            seqs = self.driver.insert_ids(conn, "insert_deliveries", [
                (d.id, d.message_id, d.execution_id, d.schedule, d.template, d.sender,
                 json.dumps(list(d.recipients)), d.state.value, d.detail, d.attempts,
                 d.created_at, d.updated_at, d.document) for d in deliveries])
            for d, seq in zip(deliveries, seqs, strict=True):
                if seq is not None:
                    recipients += [(a.lower(), seq) for a in d.recipients]
                    out.append(True)
                else:
                    out.append(self._move_delivery(conn, d.id, DeliveryState.QUEUED, d.state,
                                                   d.detail, d.attempts, d.updated_at))
            self.driver.run_each(conn, "insert_delivery_recipient", recipients)
        return out

    def update_delivery(self, delivery_id: str, current: DeliveryState, new: DeliveryState,
                        detail: str | None, attempts: int, now: int) -> bool:
        with self.driver.auto() as conn:
            return self._move_delivery(conn, delivery_id, current, new, detail, attempts, now)

    def _move_delivery(self, conn: Conn, delivery_id: str, current: DeliveryState,
                       new: DeliveryState, detail: str | None, attempts: int, now: int,
                       ) -> bool:
        DELIVERIES.check(current, new)
        return bool(conn.execute(self.q["update_delivery"], (
            new.value, detail, attempts, now, delivery_id, current.value)).rowcount > 0)

    def resend_deliveries(self, resends: Sequence[tuple[Delivery, NewMessage]],
                          queue_id: int, now: int) -> list[bool]:
        with self.driver.tx() as conn:
            won = [self._move_delivery(conn, d.id, d.state, DeliveryState.QUEUED,
                                       "resent by an operator", d.attempts, now)
                   for d, _ in resends]
            self.write_messages(conn, queue_id, [m for (_, m), ok in
                                                  zip(resends, won, strict=True) if ok],
                                 False, now)
        return won

    def get_delivery(self, delivery_id: str) -> Delivery | None:
        row = self._one("delivery_by_id", (delivery_id,))
        return None if row is None else rows.delivery(row)

    def get_deliveries(self, delivery_ids: Sequence[str]) -> dict[str, Delivery]:
        if not delivery_ids:
            return {}
        found = self._all("deliveries_by_id", (self.driver.array(delivery_ids),))
        return {d.id: d for d in map(rows.delivery, found)}

    def sent_to_since(self, wanted: Sequence[tuple[str, int]]) -> list[int]:
        with self.driver.read() as conn:
            return [int(conn.execute(self.q["sent_to_since"],
                                     {"address": address, "since": since}).fetchone()[0])
                    for address, since in wanted]

    def take_warmup(self, day: int, ladder: Sequence[int],
                    wanted: Sequence[tuple[str, int]]) -> list[int]:
        granted = []
        with self.driver.tx() as conn:
            for domain, count in wanted:
                conn.execute(self.q["warmup_open_day"], (domain, day))
                (sent,) = conn.execute(self.q["warmup_sent_today"], (domain, day)).fetchone()
                (first,) = conn.execute(self.q["warmup_first_day"], (domain,)).fetchone()
                step = day - int(first)
                room = count if step >= len(ladder) else max(ladder[step] - int(sent), 0)
                take = min(count, room)
                if take:
                    conn.execute(self.q["warmup_add"], (take, domain, day))
                granted.append(take)
        return granted

    def list_deliveries(self, recipient: str | None, state: DeliveryState | None,
                        before: int | None, limit: int) -> list[Delivery]:
        args = {"before": NO_SEQ if before is None else before,
                "state": None if state is None else state.value, "limit": limit}
        if recipient is None:
            found = self._all("list_deliveries", args)
        else:
            found = self._all("list_recipient_deliveries", {**args, "address": recipient})
        return [rows.delivery(r) for r in found]

    def find_deliveries(self, query: DeliveryQuery, after: int, limit: int,
                        ) -> list[Delivery]:
        lo, hi = rows.prefix_range(query.schedule_prefix or "")
        args = {"message_id": query.message_id, "has_prefix": query.schedule_prefix is not None,
                "lo": lo, "hi": hi, "state": query.state.value if query.state else None,
                "created_from": query.created_from, "created_until": query.created_until,
                "after": after, "limit": limit}
        if query.recipient is None:
            found = self._all("find_deliveries", args)
        else:
            found = self._all("find_recipient_deliveries", {**args, "address": query.recipient})
        return [rows.delivery(r) for r in found]

    def delivery_state_counts(self, schedule_prefix: str) -> dict[str, int]:
        found = self._all("delivery_state_counts", rows.prefix_range(schedule_prefix))
        return {state: int(n) for state, n in found}
