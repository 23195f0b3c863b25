"""Node heartbeats and the console's periodic counts: the `NodeStore` part of `SqlStore`."""

from __future__ import annotations

from typing import Any

from tidings.model.nodes import NodeRecord, TakenCount
from tidings.model.schedules import Schedule, ScheduleKey
from tidings.store import rows
from tidings.store.sqlbase import SqlBase


class SqlNodes(SqlBase):
    def put_node(self, node: NodeRecord) -> None:
        with self.driver.auto() as conn:
            conn.execute(self.q["put_node"], (node.id, node.host, node.pid, node.version,
                                              node.started_at, node.seen_at, node.activity))

    def list_nodes(self, seen_since: int) -> list[NodeRecord]:
        return [NodeRecord(*r) for r in self._all("list_nodes", (seen_since,))]

    def forget_nodes(self, seen_before: int) -> int:
        with self.driver.auto() as conn:
            return int(conn.execute(self.q["forget_nodes"], (seen_before,)).rowcount or 0)

    def put_console_count(self, name: str, value: str, taken_at: int) -> None:
        with self.driver.auto() as conn:
            conn.execute(self.q["put_console_count"], (name, value, taken_at))

    def console_counts(self) -> dict[str, TakenCount]:
        return {r[0]: TakenCount(r[1], r[2]) for r in self._all("console_counts")}

    def count_pending_schedules(self) -> int:
        return int(self._one("count_pending_schedules")[0])

    def count_due_between(self, start_ms: int, end_ms: int) -> int:
        return int(self._one("count_due_between", (start_ms, end_ms))[0])

    def delivery_counts_since(self, since_ms: int) -> dict[str, int]:
        return {r[0]: int(r[1]) for r in self._all("delivery_counts_since", (since_ms,))}

    def schedules_by_due(self, start_ms: int, end_ms: int, after: tuple[int, int] | None,
                         limit: int) -> list[Schedule]:
        found = self._due_page("schedules_by_due", start_ms, end_ms, after, limit)
        return [rows.schedule(r) for r in found]

    def schedule_keys(self, group: str | None, prefix: str, after: tuple[str, str] | None,
                      limit: int) -> list[ScheduleKey]:
        lo, hi = rows.prefix_range(prefix)
        after_group, after_name = after or ("", "")
        if group is None:
            found = self._all("schedule_keys", {
                "lo": lo, "hi": hi, "after_group": after_group, "after_name": after_name,
                "limit": limit})
        elif after_group > group:
            found = []
        else:
            found = self._all("group_schedule_keys", {
                "group": group, "lo": lo, "hi": hi,
                "after_name": after_name if after_group == group else "", "limit": limit})
        return [ScheduleKey(*r) for r in found]

    def due_schedule_keys(self, start_ms: int, end_ms: int, after: tuple[int, int] | None,
                          limit: int) -> list[ScheduleKey]:
        found = self._due_page("due_schedule_keys", start_ms, end_ms, after, limit)
        return [ScheduleKey(*r) for r in found]

    def _due_page(self, query: str, start_ms: int, end_ms: int,
                  after: tuple[int, int] | None, limit: int) -> list[Any]:
        """Rows due from `start_ms` to `end_ms`, in (due_at, id) order after the last key
        of the previous page."""
        after_due, after_id = after or (start_ms - 1, 0)
        return self._all(query, {
            "lo": max(start_ms, after_due), "hi": end_ms, "after_due": after_due,
            "after_id": after_id, "limit": limit})

    def schedule_state_counts_by_prefix(self, group: str, prefix: str) -> dict[str, int]:
        lo, hi = rows.prefix_range(prefix)
        return {r[0]: int(r[1]) for r in self._all("schedule_state_counts_between",
                                                  (group, lo, hi))}

    def group_firing_counts(self, group: str, start_ms: int, end_ms: int,
                            bucket_ms: int) -> list[tuple[int, int]]:
        args = {"bucket": bucket_ms, "group": group, "lo": start_ms, "hi": end_ms}
        return [(int(r[0]) * bucket_ms, int(r[1]))
                for r in self._all("group_firings_by_due", args)]
