"""Native API: schedule groups, schedules (one at a time or in bulk) and expression previews.

Paths name a schedule by group and name (`/v1/schedules/{group}/{name}`): names are unique
within a group only, as in EventBridge Scheduler.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response, status

from tidings.clock import to_ms
from tidings.errors import TidingsError
from tidings.model.schedules import Schedule, ScheduleSpec, ScheduleState
from tidings.schedules.service import ScheduleService
from tidings.server.errors import native_error
from tidings.server.native.deps import Ctx, NextToken, Responses
from tidings.server.native.rules import (
    AwareInstant,
    DeletableGroup,
    Expression,
    PageOf100,
    PageOf1000,
    ScheduleName,
    StateName,
    Text,
    TimeZone,
)
from tidings.server.native.schedule_models import (
    GroupDeletedOut,
    GroupIn,
    GroupListOut,
    GroupOut,
    OccurrencesOut,
    ScheduleBatchIn,
    ScheduleBatchOut,
    ScheduleCreateIn,
    ScheduleFieldsIn,
    ScheduleListOut,
    ScheduleOut,
)
from tidings.server.native.schedule_views import (
    MAX_OCCURRENCES,
    group_json,
    occurrences_json,
    schedule_json,
)

router = APIRouter(prefix="/v1", tags=["schedules"])

_DOCS: Responses = {
    400: {"description": "Bad input: code InvalidParameterValue, `error.field` naming the "
          "field (EventBridge Scheduler's name for engine rules, e.g. ScheduleExpression)."},
    404: {"description": "No such schedule (ScheduleNotFound) or group (GroupNotFound)."},
    409: {"description": "A schedule or group of this name exists (ConflictException)."},
}


def _errors(*statuses: int) -> Responses:
    return {s: _DOCS[s] for s in statuses}


def _json(s: ScheduleService, schedule: Schedule) -> dict[str, Any]:
    return schedule_json(schedule, s.schedule_arn(schedule.group, schedule.name))


def _create(s: ScheduleService, spec: ScheduleSpec) -> dict[str, Any]:
    return _json(s, s.create(spec))


def _update(s: ScheduleService, spec: ScheduleSpec) -> dict[str, Any]:
    return _json(s, s.update(spec))


def _apply(s: ScheduleService, spec: ScheduleSpec) -> dict[str, Any]:
    return _json(s, s.put(spec))


def _get(s: ScheduleService, group: str, name: str) -> dict[str, Any]:
    return _json(s, s.get(name, group))


def _set_state(s: ScheduleService, group: str, name: str,
               state: ScheduleState) -> dict[str, Any]:
    return _json(s, s.set_state(name, state, group))


def _batch(s: ScheduleService, items: list[ScheduleCreateIn]) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    specs: list[ScheduleSpec] = []
    positions: list[int] = []  # request index of each spec handed to the service
    for index, item in enumerate(items):
        try:
            specs.append(item.spec())
            positions.append(index)
        except TidingsError as exc:  # e.g. a naive start: this item fails, not the batch
            results.append({"index": index, "name": item.name, "group": item.group,
                            "created": False, "error": native_error(exc)})
    for r in s.create_many(specs):
        results.append({"index": positions[r.index], "name": r.name, "group": r.group,
                        "created": r.created,
                        "error": None if r.error is None else native_error(r.error)})
    results.sort(key=lambda r: int(r["index"]))
    return {"results": results, "created": sum(1 for r in results if r["created"]),
            "failed": sum(1 for r in results if r["error"] is not None)}


def _list(s: ScheduleService, group: str | None, prefix: str, state: str | None,
          limit: int, next_token: str | None) -> dict[str, Any]:
    rows, token = s.list(group=group, prefix=prefix, state=state, limit=limit,
                         next_token=next_token)
    return {"schedules": [_json(s, r) for r in rows], "next_token": token}


def _create_group(s: ScheduleService, name: str, tags: dict[str, str]) -> dict[str, Any]:
    return group_json(s.create_group(name, tags), s.group_arn(name))


def _get_group(s: ScheduleService, name: str) -> dict[str, Any]:
    return group_json(s.get_group(name), s.group_arn(name))


def _list_groups(s: ScheduleService, prefix: str, limit: int,
                 next_token: str | None) -> dict[str, Any]:
    groups, token = s.list_groups(prefix, limit=limit, next_token=next_token)
    return {"groups": [group_json(g, s.group_arn(g.name)) for g in groups], "next_token": token}


# groups ---------------------------------------------------------------------------------

@router.post("/schedule-groups", status_code=status.HTTP_201_CREATED, response_model=GroupOut,
             tags=["schedule groups"], responses=_errors(400, 409))
async def create_group(body: GroupIn, ctx: Ctx) -> dict[str, Any]:
    """Create a schedule group. The group `default` always exists."""
    return await ctx.bridge.run(_create_group, ctx.t.schedules, body.name, body.tags)


@router.get("/schedule-groups", response_model=GroupListOut, tags=["schedule groups"],
            responses=_errors(400))
async def list_groups(
    ctx: Ctx,
    prefix: Annotated[str, Query(description="Only groups whose name starts with this.")] = "",
    limit: Annotated[PageOf100, Query(description="Page size (1-100).")] = 100,
    next_token: NextToken = None,
) -> dict[str, Any]:
    """Schedule groups in name order."""
    return await ctx.bridge.run(_list_groups, ctx.t.schedules, prefix, limit, next_token)


@router.get("/schedule-groups/{name}", response_model=GroupOut, tags=["schedule groups"],
            responses=_errors(404))
async def get_group(name: ScheduleName, ctx: Ctx) -> dict[str, Any]:
    """One schedule group."""
    return await ctx.bridge.run(_get_group, ctx.t.schedules, name)


@router.delete("/schedule-groups/{name}", response_model=GroupDeletedOut,
               tags=["schedule groups"], responses=_errors(400, 404))
async def delete_group(name: DeletableGroup, ctx: Ctx) -> dict[str, Any]:
    """Delete a group and every schedule in it (the `default` group cannot be deleted)."""
    n = await ctx.bridge.run(ctx.t.schedules.delete_group, name)
    return {"name": name, "deleted_schedules": n}


# schedules ------------------------------------------------------------------------------

@router.post("/schedules", status_code=status.HTTP_201_CREATED, response_model=ScheduleOut,
             responses=_errors(400, 404, 409))
async def create_schedule(body: ScheduleCreateIn, ctx: Ctx) -> dict[str, Any]:
    """Create a schedule. A name already in the group is a conflict, unless the request
    repeats the `client_token` of the one that created it (a retry: the schedule is
    returned as it is)."""
    return await ctx.bridge.run(_create, ctx.t.schedules, body.spec())


@router.post("/schedules:batch", response_model=ScheduleBatchOut, responses=_errors(400))
async def create_schedules(body: ScheduleBatchIn, ctx: Ctx) -> dict[str, Any]:
    """Create up to 10,000 schedules. A batch with an item that breaks a rule of the
    document is refused whole (400, `error.field` naming the item's field); otherwise each
    item succeeds or fails on its own (`error`, for what only the stored state decides:
    the group, the target queue), and names that already exist are left untouched
    (`created: false`, no error), so a batch that was cut short can be sent again."""
    return await ctx.bridge.run(_batch, ctx.t.schedules, body.schedules)


@router.get("/schedules", response_model=ScheduleListOut, responses=_errors(400))
async def list_schedules(
    ctx: Ctx,
    group: Annotated[ScheduleName | None, Query(description="Only this group (default: all).")
                     ] = None,
    prefix: Annotated[Text, Query(description="Only names starting with this.")] = "",
    state: Annotated[StateName | None, Query(description="ENABLED or DISABLED.")] = None,
    limit: Annotated[PageOf1000, Query(description="Page size (1-1000).")] = 100,
    next_token: NextToken = None,
) -> dict[str, Any]:
    """Schedules ordered by group, then name."""
    return await ctx.bridge.run(_list, ctx.t.schedules, group, prefix, state, limit, next_token)


@router.get("/schedules/{group}/{name}", response_model=ScheduleOut, responses=_errors(404))
async def get_schedule(group: ScheduleName, name: ScheduleName, ctx: Ctx) -> dict[str, Any]:
    """One schedule, with its next occurrence."""
    return await ctx.bridge.run(_get, ctx.t.schedules, group, name)


@router.put("/schedules/{group}/{name}", response_model=ScheduleOut,
            responses=_errors(400, 404))
async def replace_schedule(group: ScheduleName, name: ScheduleName, body: ScheduleFieldsIn,
                           ctx: Ctx) -> dict[str, Any]:
    """Replace every setting of a schedule (as UpdateSchedule: omitted fields take their
    defaults, not their old values). The next occurrence is computed afresh from now."""
    return await ctx.bridge.run(_update, ctx.t.schedules, body.to_spec(name, group))


@router.post("/schedules/{group}/{name}:apply", response_model=ScheduleOut,
             responses=_errors(400, 404))
async def apply_schedule(group: ScheduleName, name: ScheduleName, body: ScheduleFieldsIn,
                         ctx: Ctx) -> dict[str, Any]:
    """Create the schedule, or replace it (as the PUT) when it differs: what a setup
    script run again wants. One already stored exactly so is left as it is, its next
    occurrence not recomputed, so nodes declaring it at every start agree."""
    return await ctx.bridge.run(_apply, ctx.t.schedules, body.to_spec(name, group))


@router.delete("/schedules/{group}/{name}", status_code=status.HTTP_204_NO_CONTENT,
               responses=_errors(404))
async def delete_schedule(group: ScheduleName, name: ScheduleName, ctx: Ctx) -> Response:
    """Delete a schedule; deliveries already under way still complete."""
    await ctx.bridge.run(ctx.t.schedules.delete, name, group)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/schedules/{group}/{name}:enable", response_model=ScheduleOut,
             responses=_errors(404))
async def enable_schedule(group: ScheduleName, name: ScheduleName, ctx: Ctx) -> dict[str, Any]:
    """Enable: it fires from its next occurrence after now (missed ones are not replayed)."""
    return await ctx.bridge.run(_set_state, ctx.t.schedules, group, name, ScheduleState.ENABLED)


@router.post("/schedules/{group}/{name}:disable", response_model=ScheduleOut,
             responses=_errors(404))
async def disable_schedule(group: ScheduleName, name: ScheduleName, ctx: Ctx) -> dict[str, Any]:
    """Disable: it keeps its settings and does not fire until enabled again."""
    return await ctx.bridge.run(_set_state, ctx.t.schedules, group, name,
                                ScheduleState.DISABLED)


@router.get("/expressions/next", response_model=OccurrencesOut, responses=_errors(400))
async def next_occurrences(
    ctx: Ctx,
    expression: Annotated[Expression, Query(description="at(...), rate(...) or cron(...).")],
    timezone: Annotated[TimeZone, Query(description="IANA zone the expression is read in.")]
    = "UTC",
    n: Annotated[int, Query(ge=1, le=MAX_OCCURRENCES,
                            description="How many occurrences (1-100).")] = 5,
    after: Annotated[AwareInstant | None, Query(
        description="RFC 3339 with its offset (URL-encode `+` as %2B, or use Z); default "
        "now. Occurrences strictly after it.")]
    = None,
) -> dict[str, Any]:
    """The next occurrences of an expression, in UTC and in its zone: check a cron before
    you schedule it. Needs no schedule; a rate() is counted from `after`."""
    start = ctx.t.clock.now_ms() if after is None else to_ms(after, "after")
    return occurrences_json(expression, timezone, start, n)
