"""The audit log: destructive and administrative actions, who made them and when.

The faces (native API, AWS APIs) know who called and whether the call succeeded; they
record it here after the action, so the log holds what was done, not what was tried.
"""

from __future__ import annotations

from tidings.clock import Clock
from tidings.model.audit import AuditEntry
from tidings.model.queues import check_range
from tidings.store.base import SecurityStore

MAX_PAGE = 1000


class AuditService:
    def __init__(self, store: SecurityStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def record(self, actor: str, face: str, action: str, resource: str) -> None:
        self.store.record_audit(self.clock.now_ms(), actor, face, action, resource[:1000])

    def list(self, *, actor: str | None = None, before: int | None = None,
             limit: int = 100) -> list[AuditEntry]:
        """Newest first; pass the last entry's `seq` as `before` for the next page."""
        check_range("limit", limit, 1, MAX_PAGE)
        return self.store.list_audit(actor, before, limit)
