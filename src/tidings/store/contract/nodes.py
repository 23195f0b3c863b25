"""Nodes' heartbeats and the console's counts: what `ops.nodes` and `ops.overview`
(the console) ask of the store."""

from __future__ import annotations

from typing import Protocol

from tidings.model.nodes import NodeRecord, TakenCount
from tidings.model.schedules import Schedule, ScheduleKey


class NodeStore(Protocol):
    """Heartbeats of the nodes and the counts the console shows (`tidings.ops.nodes`)."""

    def put_node(self, node: NodeRecord) -> None:
        """Insert or refresh the node's row (its `seen_at` and `activity`)."""
        ...

    def list_nodes(self, seen_since: int) -> list[NodeRecord]: ...
    def forget_nodes(self, seen_before: int) -> int: ...
    def put_console_count(self, name: str, value: str, taken_at: int) -> None: ...
    def console_counts(self) -> dict[str, TakenCount]: ...
    def count_pending_schedules(self) -> int:
        """Enabled schedules with an occurrence to come: a walk of the due index."""
        ...

    def count_due_between(self, start_ms: int, end_ms: int) -> int: ...
    def delivery_counts_since(self, since_ms: int) -> dict[str, int]:
        """Deliveries created since the instant, by state."""
        ...

    def schedules_by_due(self, start_ms: int, end_ms: int, after: tuple[int, int] | None,
                         limit: int) -> list[Schedule]:
        """Enabled schedules due in [start, end), by (due_at, id) after `after`."""
        ...

    def schedule_keys(self, group: str | None, prefix: str, after: tuple[str, str] | None,
                      limit: int) -> list[ScheduleKey]:
        """`list_schedules`' walk, reading only what a filter needs of each row."""
        ...

    def due_schedule_keys(self, start_ms: int, end_ms: int, after: tuple[int, int] | None,
                          limit: int) -> list[ScheduleKey]:
        """`schedules_by_due`' walk, reading only what a filter needs of each row."""
        ...

    def schedule_state_counts_by_prefix(self, group: str, prefix: str) -> dict[str, int]:
        """The group's schedules whose name starts with `prefix` (a campaign step), by state."""
        ...

    def group_firing_counts(self, group: str, start_ms: int, end_ms: int,
                            bucket_ms: int) -> list[tuple[int, int]]:
        """(bucket start, count) of the group's enabled schedules due in [start, end)."""
        ...
