"""JSON shapes of email objects, shared by the native API and the CLI's `--json` (kept
free of FastAPI, so the CLI does not import it)."""

from __future__ import annotations

from typing import Any

from tidings.clock import iso
from tidings.model.email import Delivery, StoredTemplate, Suppression


def template_json(t: StoredTemplate) -> dict[str, Any]:
    return {"name": t.name, "subject": t.subject, "html": t.html, "text": t.text,
            "created_at": iso(t.created_at), "modified_at": iso(t.modified_at)}


def delivery_json(d: Delivery) -> dict[str, Any]:
    return {"id": d.id, "message_id": d.message_id, "state": d.state.value, "sender": d.sender,
            "recipients": list(d.recipients), "template": d.template, "schedule": d.schedule,
            "execution_id": d.execution_id, "detail": d.detail, "attempts": d.attempts,
            "created_at": iso(d.created_at), "updated_at": iso(d.updated_at)}


def suppression_json(s: Suppression) -> dict[str, Any]:
    return {"address": s.address, "reason": s.reason.value, "created_at": iso(s.created_at)}
