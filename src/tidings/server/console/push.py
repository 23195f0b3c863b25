"""The queue page's push subscription section: the subscription, its recent failures, and
"send test push" (`tidings.push`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from tidings.client import Tidings
from tidings.model.push import SubscriptionFailure, SubscriptionNotFound
from tidings.push.service import SubscriptionView
from tidings.push.trial import send_test_push
from tidings.server.console.session import Session
from tidings.server.console.web import Console, action


@dataclass(frozen=True)
class PushPanel:
    subscription: SubscriptionView | None
    failures: list[SubscriptionFailure]


def push_panel(t: Tidings, queue: str) -> PushPanel:
    try:
        view = t.push.get(queue)
    except SubscriptionNotFound:
        return PushPanel(None, [])
    return PushPanel(view, t.push.failures(queue, 10))


def routes(console: Console) -> list[Route]:
    ctx = console.ctx

    async def test_push(request: Request, session: Session, form: dict[str, Any]) -> str:
        name = request.path_params["name"]
        answer = await send_test_push(ctx.t.push, name)
        if answer.ok:
            return f"Test push to {name}'s endpoint: answered {answer.status}."
        return f"Test push to {name}'s endpoint failed: {answer.error}"

    async def toggle(request: Request, session: Session, form: dict[str, Any]) -> str:
        name = request.path_params["name"]
        if form.get("to") == "paused":
            await ctx.bridge.run(ctx.t.push.pause, name)
            return f"Paused the push subscription of {name}."
        await ctx.bridge.run(ctx.t.push.resume, name)
        return f"Resumed the push subscription of {name}."

    return [
        Route("/queues/{name}/test-push", action(console, "operate", test_push),
              methods=["POST"]),
        Route("/queues/{name}/push-state", action(console, "operate", toggle),
              methods=["POST"]),
    ]
