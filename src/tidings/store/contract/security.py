"""The audit log and the verified email identities: what `ops.audit` and
`email.identities` ask of the store."""

from __future__ import annotations

from typing import Protocol

from tidings.model.audit import AuditEntry, EmailIdentity


class SecurityStore(Protocol):
    """The audit log (append-only) and the verified email identities."""

    def record_audit(self, at: int, actor: str, face: str, action: str,
                     resource: str) -> None: ...
    def list_audit(self, actor: str | None, before: int | None,
                   limit: int) -> list[AuditEntry]:
        """Newest first; `before` is the `seq` of the previous page's last entry."""
        ...

    def add_email_identity(self, identity: str, now: int) -> bool:
        """False when it was there already."""
        ...

    def delete_email_identity(self, identity: str) -> bool: ...
    def list_email_identities(self) -> list[EmailIdentity]: ...
