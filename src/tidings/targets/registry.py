"""The built-in target kinds, registered: what every caller asks (`target_of(target)`).

A kind of one's own: a class implementing `tidings.targets.base.Target`, a member of
`TargetKind`, and one `TARGETS.register(...)` line here (docs/architecture.md, "Targets:
the contract").
"""

from __future__ import annotations

from tidings.model.schedules import Target as TargetSpec
from tidings.targets.base import Target, TargetRegistry
from tidings.targets.email_target import EmailTarget
from tidings.targets.function import FunctionTarget
from tidings.targets.queue import QueueTarget
from tidings.targets.webhook_target import WebhookTarget

TARGETS = TargetRegistry([QueueTarget(), WebhookTarget(), FunctionTarget(), EmailTarget()])

#: `TARGETS.of`, bound once: the dispatcher asks it for every firing.
target_of = TARGETS.of


def native_kinds() -> tuple[str, ...]:
    """The kinds the native API and the CLI make from plain fields."""
    return tuple(t.kind.value for t in TARGETS.kinds() if t.native_fields)


__all__ = ["TARGETS", "Target", "TargetSpec", "native_kinds", "target_of"]
