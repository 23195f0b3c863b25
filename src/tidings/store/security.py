"""The audit log and verified email identities: the `SecurityStore` part of `SqlStore`."""

from __future__ import annotations

from tidings.model.audit import AuditEntry, EmailIdentity
from tidings.store.sqlbase import SqlBase

_NO_SEQ = 2**62  # "before the end": the first page of the log


class SqlSecurity(SqlBase):
    def record_audit(self, at: int, actor: str, face: str, action: str,
                     resource: str) -> None:
        with self.driver.auto() as conn:
            conn.execute(self.q["insert_audit"], (at, actor, face, action, resource))

    def list_audit(self, actor: str | None, before: int | None,
                   limit: int) -> list[AuditEntry]:
        found = self._all("list_audit", {"before": _NO_SEQ if before is None else before,
                                         "actor": actor, "limit": limit})
        return [AuditEntry(*r) for r in found]

    def add_email_identity(self, identity: str, now: int) -> bool:
        with self.driver.auto() as conn:
            return bool(conn.execute(self.q["insert_email_identity"],
                                     (identity, now)).rowcount)

    def delete_email_identity(self, identity: str) -> bool:
        with self.driver.auto() as conn:
            return bool(conn.execute(self.q["delete_email_identity"], (identity,)).rowcount)

    def list_email_identities(self) -> list[EmailIdentity]:
        return [EmailIdentity(*r) for r in self._all("list_email_identities")]
