"""An audit-log entry: who did which destructive or administrative action, when."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AuditEntry:
    seq: int
    at: int  # epoch ms
    actor: str  # a token id (`token-1a2b3c4d` or its name) or an AWS access key id
    face: str  # native, sqs, scheduler, ses
    action: str  # e.g. "DELETE /v1/queues/{name}" or "sqs:DeleteQueue"
    resource: str  # what it acted on: the request path or the queue/schedule name


@dataclass(frozen=True)
class EmailIdentity:
    identity: str  # an address (a@example.com) or a domain (example.com)
    created_at: int
