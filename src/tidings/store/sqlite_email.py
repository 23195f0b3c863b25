"""The email half of the SQLite store (mixed into `SQLiteStore`): templates, the
suppression list and the delivery log."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from tidings.errors import ConflictError, TemplateNotFound
from tidings.model.email import (
    Delivery,
    DeliveryState,
    StoredTemplate,
    Suppression,
    SuppressionReason,
)
from tidings.store.sqlfiles import queries

Q = queries("sqlite")


def _template(r: Sequence[Any]) -> StoredTemplate:
    return StoredTemplate(r[0], r[1], r[2], r[3], r[4], r[5])


def _suppression(r: Sequence[Any]) -> Suppression:
    return Suppression(r[0], SuppressionReason(r[1]), r[2])


def _delivery(r: Sequence[Any]) -> Delivery:
    return Delivery(seq=r[0], id=r[1], message_id=r[2], execution_id=r[3], schedule=r[4],
                    template=r[5], sender=r[6], recipients=tuple(json.loads(r[7])),
                    state=DeliveryState(r[8]), detail=r[9], attempts=r[10], created_at=r[11],
                    updated_at=r[12])


class SQLiteEmail:
    _lock: threading.RLock
    _conn: sqlite3.Connection

    # Provided by SQLiteStore, which mixes this class in.
    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    # templates ----------------------------------------------------------------------------

    def create_template(self, template: StoredTemplate) -> None:
        t = template
        with self._tx() as conn:
            cur = conn.execute(Q["insert_template"], (t.name, t.subject, t.html, t.text,
                                                      t.created_at, t.modified_at))
            if cur.rowcount == 0:
                raise ConflictError(f"Template {t.name} already exists.")

    def update_template(self, name: str, subject: str, html: str | None, text: str | None,
                        now: int) -> StoredTemplate:
        with self._tx() as conn:
            if conn.execute(Q["update_template"], (subject, html, text, now, name)).rowcount == 0:
                raise TemplateNotFound(name, f"Template {name} does not exist.")
            row = conn.execute(Q["template_columns"] + " WHERE name = ?", (name,)).fetchone()
        return _template(row)

    def get_template(self, name: str) -> StoredTemplate:
        with self._lock:
            row = self._conn.execute(Q["template_columns"] + " WHERE name = ?",
                                     (name,)).fetchone()
        if row is None:
            raise TemplateNotFound(name, f"Template {name} does not exist.")
        return _template(row)

    def list_templates(self, after: str | None, limit: int) -> list[StoredTemplate]:
        with self._lock:
            rows = self._conn.execute(Q["template_columns"] + " WHERE name > ? ORDER BY name"
                                      " LIMIT ?", (after or "", limit)).fetchall()
        return [_template(r) for r in rows]

    def delete_template(self, name: str) -> None:
        with self._tx() as conn:
            if conn.execute(Q["delete_template"], (name,)).rowcount == 0:
                raise TemplateNotFound(name, f"Template {name} does not exist.")

    # suppression list -----------------------------------------------------------------------

    def add_suppressions(self, addresses: Sequence[str], reason: SuppressionReason,
                         now: int) -> int:
        with self._tx() as conn:
            cur = conn.executemany(Q["put_suppression"],
                                   [(a, reason.value, now) for a in addresses])
            return int(cur.rowcount)

    def remove_suppression(self, address: str) -> bool:
        with self._tx() as conn:
            return conn.execute(Q["delete_suppression"], (address,)).rowcount > 0

    def suppressed_among(self, addresses: Sequence[str]) -> dict[str, Suppression]:
        if not addresses:
            return {}
        with self._lock:
            rows = self._conn.execute(Q["suppressed_among"],
                                      (json.dumps(list(addresses)),)).fetchall()
        return {r[0]: _suppression(r) for r in rows}

    def list_suppressions(self, reason: SuppressionReason | None, after: str | None,
                          limit: int) -> list[Suppression]:
        sql = Q["suppression_columns"] + " WHERE address > ?"
        args: list[Any] = [after or ""]
        if reason is not None:
            sql += " AND reason = ?"
            args.append(reason.value)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY address LIMIT ?",
                                      (*args, limit)).fetchall()
        return [_suppression(r) for r in rows]

    # delivery log -------------------------------------------------------------------------

    @staticmethod
    def _insert_delivery(conn: sqlite3.Connection, d: Delivery) -> bool:
        row = conn.execute(Q["insert_delivery"], (
            d.id, d.message_id, d.execution_id, d.schedule, d.template, d.sender,
            json.dumps(list(d.recipients)), d.state.value, d.detail, d.attempts, d.created_at,
            d.updated_at)).fetchone()
        if row is None:
            return False
        conn.executemany(Q["insert_delivery_recipient"],
                         [(a.lower(), row[0]) for a in d.recipients])
        return True

    def insert_delivery(self, delivery: Delivery) -> bool:
        with self._tx() as conn:
            return self._insert_delivery(conn, delivery)

    def record_deliveries(self, deliveries: Sequence[Delivery]) -> list[bool]:
        """Insert each delivery, or move the existing QUEUED row to its state (one
        transaction); False where the row was already final."""
        out = []
        with self._tx() as conn:
            for d in deliveries:
                if self._insert_delivery(conn, d):
                    out.append(True)
                    continue
                cur = conn.execute(Q["update_delivery"], (d.state.value, d.detail, d.attempts,
                                                          d.updated_at, d.id))
                out.append(cur.rowcount > 0)
        return out

    def update_delivery(self, delivery_id: str, state: DeliveryState, detail: str | None,
                        attempts: int, now: int) -> bool:
        with self._tx() as conn:
            return conn.execute(Q["update_delivery"], (state.value, detail, attempts, now,
                                                       delivery_id)).rowcount > 0

    def get_delivery(self, delivery_id: str) -> Delivery | None:
        with self._lock:
            row = self._conn.execute(Q["delivery_columns"] + " WHERE d.id = ?",
                                     (delivery_id,)).fetchone()
        return None if row is None else _delivery(row)

    def get_deliveries(self, delivery_ids: Sequence[str]) -> dict[str, Delivery]:
        if not delivery_ids:
            return {}
        with self._lock:
            rows = self._conn.execute(Q["deliveries_by_id"],
                                      (json.dumps(list(delivery_ids)),)).fetchall()
        return {r[1]: _delivery(r) for r in rows}

    def list_deliveries(self, recipient: str | None, state: DeliveryState | None,
                        before: int | None, limit: int) -> list[Delivery]:
        """Newest first; `before` is the `seq` of the last row of the previous page."""
        sql = Q["delivery_columns"]
        args: list[Any] = []
        where = ["d.seq < ?"]
        args.append(before if before is not None else 2**62)
        if recipient is not None:
            sql += " JOIN email_delivery_recipients r ON r.delivery_seq = d.seq"
            where.append("r.address = ?")
            args.append(recipient)
        if state is not None:
            where.append("d.state = ?")
            args.append(state.value)
        sql += " WHERE " + " AND ".join(where) + " ORDER BY d.seq DESC LIMIT ?"
        with self._lock:
            rows = self._conn.execute(sql, (*args, limit)).fetchall()
        return [_delivery(r) for r in rows]
