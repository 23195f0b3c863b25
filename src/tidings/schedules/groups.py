"""Schedule groups: the namespaces schedules live in, with their tags. Deleting a group
deletes its schedules (as EventBridge Scheduler does); the group `default` always exists.

The group half of the schedule service: `ScheduleService` extends it, so `t.schedules`
answers for both, as the Scheduler API does.
"""

from __future__ import annotations

from collections.abc import Sequence

from tidings.clock import Clock
from tidings.errors import ConflictError, ValidationError
from tidings.model.paging import compound_after, compound_token
from tidings.model.queues import check_range, validate_tags
from tidings.model.schedules import DEFAULT_GROUP, ScheduleGroup, check_name
from tidings.store.base import ScheduleStore


class ScheduleGroups:
    store: ScheduleStore
    clock: Clock
    arn_prefix: str

    def group_arn(self, group: str) -> str:
        return f"{self.arn_prefix}:schedule-group/{group}"

    def create_group(self, name: str, tags: dict[str, str] | None = None, *,
                     client_token: str | None = None) -> ScheduleGroup:
        """A create repeating the `client_token` of the one that made the group (a retry,
        as AWS SDKs send it) answers with that group instead of ConflictException."""
        check_name("Name", name)
        validate_tags(tags or {})
        if client_token is not None and not 1 <= len(client_token) <= 64:
            raise ValidationError("ClientToken", "must be 1-64 characters")
        if not self.store.create_group(name, dict(tags or {}), self.clock.now_ms(),
                                       client_token):
            existing = self.store.get_group(name)
            if client_token is not None and existing.client_token == client_token:
                return existing
            raise ConflictError(f"Schedule group {name} already exists.")
        return self.store.get_group(name)

    def get_group(self, name: str) -> ScheduleGroup:
        return self.store.get_group(name)

    def list_groups(self, prefix: str = "", *, limit: int = 100,
                    next_token: str | None = None) -> tuple[list[ScheduleGroup], str | None]:
        check_range("MaxResults", limit, 1, 100)
        after = compound_after(next_token)[0] if next_token else None
        groups = self.store.list_groups(prefix, after, limit + 1)
        more = len(groups) > limit
        groups = groups[:limit]
        return groups, (compound_token([groups[-1].name]) if more else None)

    def delete_group(self, name: str) -> int:
        if name == DEFAULT_GROUP:
            raise ValidationError("Name", "the default schedule group cannot be deleted")
        return self.store.delete_group(name)

    def tag_group(self, name: str, tags: dict[str, str]) -> None:
        group = self.store.get_group(name)
        merged = {**group.tags, **tags}
        validate_tags(merged)
        self.store.tag_group(name, merged, self.clock.now_ms())

    def untag_group(self, name: str, keys: Sequence[str]) -> None:
        group = self.store.get_group(name)
        self.store.tag_group(name, {k: v for k, v in group.tags.items() if k not in keys},
                             self.clock.now_ms())
