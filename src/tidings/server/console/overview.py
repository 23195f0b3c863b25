"""The console's front page: nodes, activity of the last hour, what is pending, what needs
attention. Everything comes from heartbeats and counters (`tidings.ops.overview`)."""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.server.console.charts import chart
from tidings.server.console.session import Session
from tidings.server.console.web import Console, page


def routes(console: Console) -> list[Route]:
    ctx = console.ctx

    async def overview(request: Request, session: Session) -> Response:
        from tidings.server.app import backend_name  # (app imports this package)

        view = await ctx.bridge.run(ctx.t.overview.overview)
        labels = [datetime.fromtimestamp(m / 1000, UTC).strftime("%H:%M") for m in view.minutes]
        per_s = [(name, [v / 60 for v in values]) for name, values in
                 (("firings/s", view.firings), ("messages sent/s", view.sent))]
        charts = [
            chart("Firings and messages per second, last hour (UTC)", labels, per_s),
            chart("Failed deliveries per minute, last hour", labels,
                  [("failed", view.failed)], kind="bar"),
        ]
        return console.render(request, session, "overview.html", v=view, charts=charts,
                              backend=backend_name(ctx.t.database_url))

    return [Route("/", page(console, overview), methods=["GET"])]
