"""`GET /v1/audit`: the audit log, newest first (admin scope)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from tidings.clock import iso
from tidings.model.audit import AuditEntry
from tidings.ops.audit import MAX_PAGE
from tidings.server.native.deps import Ctx

router = APIRouter(prefix="/v1", tags=["audit"])


def entry_json(e: AuditEntry) -> dict[str, Any]:
    return {"seq": e.seq, "at": iso(e.at), "actor": e.actor, "face": e.face,
            "action": e.action, "resource": e.resource}


@router.get("/audit")
async def list_audit(ctx: Ctx, actor: str | None = None,
                     # le: a 64-bit sequence number (larger reached SQLite and was a 500)
                     before: Annotated[int | None, Query(ge=1, le=2**63 - 1)] = None,
                     limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
                     ) -> dict[str, Any]:
    """Destructive and administrative actions: who (token or access key id), what, when.
    Page with `before` = the last entry's `seq`."""
    entries = await ctx.bridge.run(lambda: ctx.t.audit.list(actor=actor, before=before,
                                                            limit=limit))
    out: dict[str, Any] = {"entries": [entry_json(e) for e in entries]}
    if len(entries) == limit:
        out["next_before"] = entries[-1].seq
    return out
