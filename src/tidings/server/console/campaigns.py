"""Console views of campaigns: the list, and one campaign's progress by step, its load
forecast (a chart), pause/resume/cancel, and cancelling one recipient found by id."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.server.console.charts import chart
from tidings.server.console.session import Session
from tidings.server.console.web import Console, action, page

PAGE = 50


def routes(console: Console) -> list[Route]:
    ctx = console.ctx
    campaigns = ctx.t.campaigns
    views = ctx.t.campaign_views

    async def list_page(request: Request, session: Session) -> Response:
        after = request.query_params.get("after") or None
        found = await ctx.bridge.run(campaigns.list, after=after, limit=PAGE + 1)
        more = len(found) > PAGE
        return console.render(request, session, "campaigns.html", campaigns=found[:PAGE],
                              next_after=found[PAGE - 1].name if more else None,
                              now=ctx.t.clock.now_ms())

    async def one(request: Request, session: Session) -> Response:
        name = request.path_params["name"]
        view = await ctx.bridge.run(campaigns.status, name)
        steps = await ctx.bridge.run(views.steps, name)
        start, counts = await ctx.bridge.run(views.forecast, name)
        labels = [datetime.fromtimestamp((start + i * 60_000) / 1000, UTC).strftime("%H:%M")
                  for i in range(len(counts))]
        forecast = chart("Firings per minute, next 6 hours (UTC)", labels,
                         [("firings", counts)], kind="bar")
        limited = await ctx.bridge.run(views.limited, name)
        who = request.query_params.get("recipient", "")
        found = await ctx.bridge.run(views.recipient, name, who) if who.strip() else None
        return console.render(request, session, "campaign.html", c=view, steps=steps,
                              forecast=forecast, total=sum(counts), found=found,
                              limited=limited,
                              recipient=who, now=ctx.t.clock.now_ms())

    def _move(verb: str) -> Any:
        async def act(request: Request, session: Session, form: dict[str, Any]) -> str:
            name = request.path_params["name"]
            view = await ctx.bridge.run(getattr(campaigns, verb), name)
            return f"Campaign {name} is {view.record.status.value.lower()}."
        return act

    async def cancel_recipient(request: Request, session: Session, form: dict[str, Any]) -> str:
        name = request.path_params["name"]
        who = form.get("recipient", "")
        n = await ctx.bridge.run(campaigns.cancel_recipient, name, who)
        return f"Cancelled {n} remaining step(s) of recipient {who} in {name}."

    return [
        Route("/campaigns", page(console, list_page), methods=["GET"]),
        Route("/campaigns/{name}", page(console, one), methods=["GET"]),
        *(Route(f"/campaigns/{{name}}/{verb}", action(console, "operate", _move(verb)),
                methods=["POST"]) for verb in ("pause", "resume", "cancel")),
        Route("/campaigns/{name}/cancel-recipient", action(console, "operate", cancel_recipient),
              methods=["POST"]),
    ]
