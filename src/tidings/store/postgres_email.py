"""The email part of the PostgreSQL store (mixed into `PostgresStore`): templates, the
suppression list and the delivery log. Same contract as `sqlite_email.py`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from tidings.errors import ConflictError, TemplateNotFound
from tidings.model.email import (
    Delivery,
    DeliveryState,
    StoredTemplate,
    Suppression,
    SuppressionReason,
)
from tidings.store.sqlfiles import queries
from tidings.store.sqlite_email import _delivery, _suppression, _template

Q = queries("postgres")


class PostgresEmail:
    # Provided by PostgresStore, which mixes this class in.
    def _tx(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        raise NotImplementedError

    def _email_rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._tx() as conn:
            return conn.execute(sql, args).fetchall()

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
            row = conn.execute(Q["template_columns"] + " WHERE name = %s", (name,)).fetchone()
        assert row is not None
        return _template(row)

    def get_template(self, name: str) -> StoredTemplate:
        rows = self._email_rows(Q["template_columns"] + " WHERE name = %s", (name,))
        if not rows:
            raise TemplateNotFound(name, f"Template {name} does not exist.")
        return _template(rows[0])

    def list_templates(self, after: str | None, limit: int) -> list[StoredTemplate]:
        rows = self._email_rows(Q["template_columns"] + ' WHERE name COLLATE "C" > %s'
                                ' ORDER BY name COLLATE "C" LIMIT %s', (after or "", limit))
        return [_template(r) for r in rows]

    def delete_template(self, name: str) -> None:
        with self._tx() as conn:
            if conn.execute(Q["delete_template"], (name,)).rowcount == 0:
                raise TemplateNotFound(name, f"Template {name} does not exist.")

    # suppression list -----------------------------------------------------------------------

    def add_suppressions(self, addresses: Sequence[str], reason: SuppressionReason,
                         now: int) -> int:
        with self._tx() as conn:
            return int(conn.execute(Q["put_suppressions"],
                                    (reason.value, now, list(addresses))).rowcount)

    def remove_suppression(self, address: str) -> bool:
        with self._tx() as conn:
            return conn.execute(Q["delete_suppression"], (address,)).rowcount > 0

    def suppressed_among(self, addresses: Sequence[str]) -> dict[str, Suppression]:
        if not addresses:
            return {}
        rows = self._email_rows(Q["suppressed_among"], (list(addresses),))
        return {r[0]: _suppression(r) for r in rows}

    def list_suppressions(self, reason: SuppressionReason | None, after: str | None,
                          limit: int) -> list[Suppression]:
        sql = Q["suppression_columns"] + ' WHERE address COLLATE "C" > %s'
        args: list[Any] = [after or ""]
        if reason is not None:
            sql += " AND reason = %s"
            args.append(reason.value)
        rows = self._email_rows(sql + ' ORDER BY address COLLATE "C" LIMIT %s', (*args, limit))
        return [_suppression(r) for r in rows]

    # delivery log -------------------------------------------------------------------------

    @staticmethod
    def _insert_delivery(conn: psycopg.Connection[Any], d: Delivery) -> bool:
        row = conn.execute(Q["insert_delivery"], (
            d.id, d.message_id, d.execution_id, d.schedule, d.template, d.sender,
            json.dumps(list(d.recipients)), d.state.value, d.detail, d.attempts, d.created_at,
            d.updated_at)).fetchone()
        if row is None:
            return False
        conn.execute(Q["insert_delivery_recipients"],
                     (row[0], [a.lower() for a in d.recipients]))
        return True

    def insert_delivery(self, delivery: Delivery) -> bool:
        with self._tx() as conn:
            return self._insert_delivery(conn, delivery)

    def record_deliveries(self, deliveries: Sequence[Delivery]) -> list[bool]:
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
        rows = self._email_rows(Q["delivery_columns"] + " WHERE d.id = %s", (delivery_id,))
        return _delivery(rows[0]) if rows else None

    def get_deliveries(self, delivery_ids: Sequence[str]) -> dict[str, Delivery]:
        if not delivery_ids:
            return {}
        return {r[1]: _delivery(r) for r in self._email_rows(Q["deliveries_by_id"],
                                                             (list(delivery_ids),))}

    def list_deliveries(self, recipient: str | None, state: DeliveryState | None,
                        before: int | None, limit: int) -> list[Delivery]:
        sql = Q["delivery_columns"]
        where = ["d.seq < %s"]
        args: list[Any] = [before if before is not None else 2**62]
        if recipient is not None:
            sql += " JOIN email_delivery_recipients r ON r.delivery_seq = d.seq"
            where.append("r.address = %s")
            args.append(recipient)
        if state is not None:
            where.append("d.state = %s")
            args.append(state.value)
        sql += " WHERE " + " AND ".join(where) + " ORDER BY d.seq DESC LIMIT %s"
        return [_delivery(r) for r in self._email_rows(sql, (*args, limit))]
