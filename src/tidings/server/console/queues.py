"""Console views of queues: the list, one queue (attributes, a peek that leaves messages
as they were, recorded errors, move tasks) and its actions (purge, test message, redrive)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.errors import ValidationError
from tidings.model.queues import MoveTask, QueueRecord
from tidings.queues.service import MessageView, QueueInfo, QueueService
from tidings.server.console.push import push_panel
from tidings.server.console.session import Session
from tidings.server.console.web import Console, action, page

PEEK = 20


@dataclass(frozen=True)
class QueueRow:
    info: QueueInfo
    oldest_sent_at: int | None

    @property
    def dlq(self) -> str | None:
        policy = self.info.record.attributes.redrive_policy
        return policy.dead_letter_queue if policy else None


@dataclass(frozen=True)
class QueuePage:
    info: QueueInfo
    messages: list[MessageView]
    next_token: str | None
    sources: list[QueueRecord]  # set when this queue is a DLQ
    tasks: list[MoveTask]
    names: dict[int, str]
    errors: list[MessageView]


def queue_rows(q: QueueService, infos: list[QueueInfo]) -> list[QueueRow]:
    """Each queue with the send time of the message next in line (a peek of one)."""
    out = []
    for info in infos:
        first, _ = q.peek(info.name, limit=1)
        out.append(QueueRow(info, first[0].message.sent_at if first else None))
    return out


def queue_page(q: QueueService, name: str, token: str | None) -> QueuePage:
    info = q.describe(name)
    messages, next_token = q.peek(name, limit=PEEK, next_token=token)
    sources = q.dead_letter_sources(name)
    tasks = q.list_move_tasks(name, 5) if sources else []
    return QueuePage(info, messages, next_token, sources, tasks, q.queue_names(tasks),
                     [m for m in messages if m.message.last_error])


def routes(console: Console) -> list[Route]:
    ctx = console.ctx
    q = ctx.t.queues

    async def list_page(request: Request, session: Session) -> Response:
        prefix = request.query_params.get("prefix", "")
        after = request.query_params.get("after") or None
        infos, token = await ctx.bridge.run(ctx.t.overview.queue_page, prefix, after)
        rows = await ctx.bridge.run(queue_rows, q, infos)
        return console.render(request, session, "queues.html", rows=rows, prefix=prefix,
                              next_token=token, now=ctx.t.clock.now_ms())

    async def one(request: Request, session: Session) -> Response:
        name = request.path_params["name"]
        view = await ctx.bridge.run(queue_page, q, name, request.query_params.get("after"))
        push = await ctx.bridge.run(push_panel, ctx.t, name)
        return console.render(request, session, "queue.html", q=view, now=ctx.t.clock.now_ms(),
                              page_token=request.query_params.get("after"), push=push)

    async def purge(request: Request, session: Session, form: dict[str, Any]) -> str:
        name = request.path_params["name"]
        n = await ctx.bridge.run(q.purge_queue, name)
        return f"Purged {n} message(s) from {name}."

    async def send(request: Request, session: Session, form: dict[str, Any]) -> str:
        name = request.path_params["name"]
        body = form.get("body") or ""
        if not body:
            raise ValidationError("body", "a test message needs a body")
        group = form.get("group_id") or None
        dedup = form.get("deduplication_id") or None
        result = await ctx.bridge.run(q.send, name, body, group_id=group,
                                      deduplication_id=dedup)
        return f"Sent message {result.message_id} to {name}."

    async def redrive(request: Request, session: Session, form: dict[str, Any]) -> str:
        name = request.path_params["name"]
        selected = form["selected"]
        if form.get("which") == "selected":
            if not selected:
                raise ValidationError("selected", "choose at least one message")
            try:
                ids = [int(s) for s in selected]
            except ValueError:
                raise ValidationError("selected", "must be message row numbers") from None
            n = await ctx.bridge.run(q.redrive_selected, name, ids)
            return f"Moved {n} of {len(ids)} chosen message(s) back to their source queue."
        rate = form.get("rate") or None
        handle = await ctx.bridge.run(q.start_move_task, name, None,
                                      int(rate) if rate and rate.isdigit() else None)
        return f"Started a message move task ({handle[:8]}…) from {name} to its source queue(s)."

    async def cancel_task(request: Request, session: Session, form: dict[str, Any]) -> str:
        await ctx.bridge.run(q.cancel_move_task, form.get("handle") or "")
        return "Cancelled the message move task."

    return [
        Route("/queues", page(console, list_page), methods=["GET"]),
        Route("/queues/{name}", page(console, one), methods=["GET"]),
        Route("/queues/{name}/purge", action(console, "admin", purge), methods=["POST"]),
        Route("/queues/{name}/send", action(console, "operate", send), methods=["POST"]),
        Route("/queues/{name}/redrive", action(console, "operate", redrive), methods=["POST"]),
        Route("/queues/{name}/cancel-move", action(console, "operate", cancel_task),
              methods=["POST"]),
    ]
