"""What a node cannot do right now, for its readiness probe (`GET /health/ready`) and the
`tidings_component_failing` gauge.

`GET /health` only says that the process answers. A node can answer and still do none of
its work: its database unreachable or its disk full (each loop backing off and retrying),
its dispatcher process dead and being restarted (nothing fires meanwhile). A load
balancer or an orchestrator's readiness probe needs to know that, and so does an operator
reading the metrics, not only the log. So each loop that backs off says why here
(`Backoff` does it for them) and clears it on its next success. Nothing polls the loops:
what is read is what they last met.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from tidings.runtime import metrics


@dataclass(frozen=True)
class Trouble:
    reason: str
    since_ms: int  # wall clock (shown to people): when the component stopped working


class Health:
    """The troubles of one process's components, by component name ("dispatcher",
    "sweeper", "consumer of jobs", ...). Used from the event loop's thread only.

    `export` sets the gauge (the node's process; a dispatcher process forwards its
    troubles to its node instead, through `on_change`)."""

    def __init__(self, *, export: bool = True,
                 on_change: Callable[[dict[str, Trouble]], None] | None = None) -> None:
        self._troubles: dict[str, Trouble] = {}
        self._export = export
        self.on_change = on_change

    def failing(self, component: str, reason: str) -> None:
        """`component` cannot do its work, for `reason`; `since` stays that of the first
        report while it keeps failing (a new reason does not restart the clock)."""
        old = self._troubles.get(component)
        if old is not None and old.reason == reason:
            return
        since = old.since_ms if old is not None else time.time_ns() // 1_000_000
        self._troubles[component] = Trouble(reason, since)
        if self._export:
            metrics.COMPONENT_FAILING.labels(component).set(1)
        self._changed()

    def recovered(self, component: str) -> None:
        if self._troubles.pop(component, None) is None:
            return
        if self._export:
            metrics.COMPONENT_FAILING.labels(component).set(0)
        self._changed()

    def troubles(self) -> dict[str, Trouble]:
        return dict(self._troubles)

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self.troubles())
