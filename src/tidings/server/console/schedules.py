"""Console views of schedules: a keyset-paged search and one schedule's page (its
expression in words, next occurrences in its zone and the viewer's, target, retries, DLQ,
last firings), with enable/disable and delete."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.errors import ValidationError
from tidings.model.states import ScheduleState
from tidings.schedules.search import ScheduleQuery
from tidings.server.console.session import Session
from tidings.server.console.web import Console, action, page
from tidings.triggers.base import resolve_zone

PAGE = 50


def parse_instant(field: str, value: str) -> int | None:
    """A `datetime-local` value (or an ISO date/time), read as UTC; empty: none."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValidationError(field, "must be a date and time like 2026-12-01T09:00") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


def query_of(params: Any) -> ScheduleQuery:
    state = params.get("state") or None
    if state not in (None, "ENABLED", "DISABLED"):
        raise ValidationError("state", "must be ENABLED or DISABLED")
    return ScheduleQuery(group=params.get("group") or None, prefix=params.get("prefix", ""),
                         state=state, target=params.get("target", "").strip(),
                         due_from=parse_instant("from", params.get("from", "")),
                         due_until=parse_instant("until", params.get("until", "")),
                         limit=PAGE)


def routes(console: Console) -> list[Route]:
    ctx = console.ctx
    search = ctx.t.schedule_search

    async def list_page(request: Request, session: Session) -> Response:
        params = request.query_params
        filters = {k: params.get(k, "") for k in
                   ("group", "prefix", "state", "target", "from", "until")}
        groups, _ = await ctx.bridge.run(ctx.t.schedules.list_groups, limit=100)
        try:
            query = query_of(params)
            found = await ctx.bridge.run(search.search, query, params.get("after") or None)
            error = ""
        except ValidationError as exc:
            found, error = None, str(exc)
        return console.render(request, session, "schedules.html", found=found, error=error,
                              filters=filters, groups=[g.name for g in groups],
                              now=ctx.t.clock.now_ms(), first=not params.get("after"))

    async def one(request: Request, session: Session) -> Response:
        group, name = request.path_params["group"], request.path_params["name"]
        detail = await ctx.bridge.run(search.detail, group, name)
        zone = resolve_zone(detail.schedule.spec.timezone)
        return console.render(request, session, "schedule.html", d=detail, zone=zone,
                              now=ctx.t.clock.now_ms())

    def _names(request: Request) -> tuple[str, str]:
        return request.path_params["group"], request.path_params["name"]

    async def enable(request: Request, session: Session, form: dict[str, Any]) -> str:
        group, name = _names(request)
        await ctx.bridge.run(ctx.t.schedules.set_state, name, ScheduleState.ENABLED, group)
        return f"Enabled schedule {group}/{name}."

    async def disable(request: Request, session: Session, form: dict[str, Any]) -> str:
        group, name = _names(request)
        await ctx.bridge.run(ctx.t.schedules.set_state, name, ScheduleState.DISABLED, group)
        return f"Disabled schedule {group}/{name}."

    async def delete(request: Request, session: Session, form: dict[str, Any]) -> str:
        group, name = _names(request)
        await ctx.bridge.run(ctx.t.schedules.delete, name, group)
        return f"Deleted schedule {group}/{name}."

    return [
        Route("/schedules", page(console, list_page), methods=["GET"]),
        Route("/schedules/{group}/{name}", page(console, one), methods=["GET"]),
        Route("/schedules/{group}/{name}/enable", action(console, "operate", enable),
              methods=["POST"]),
        Route("/schedules/{group}/{name}/disable", action(console, "operate", disable),
              methods=["POST"]),
        Route("/schedules/{group}/{name}/delete", action(console, "admin", delete),
              methods=["POST"]),
    ]
