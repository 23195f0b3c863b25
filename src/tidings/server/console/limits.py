"""The limits page (`/ui/limits`, issue 33): every key with a setting, a pause or slots in
use, with its current use, what this node holds back for it and its pause; set a limit,
pause, resume and delete it. The changes are the CLI's and the API's (`t.limits`): every
node obeys them within a second. Changing a limit needs the admin scope, as over the API."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.errors import ValidationError
from tidings.runtime import metrics
from tidings.server.console.session import Session
from tidings.server.console.web import Console, action, page

#: The longest pause the form offers (the service allows up to a year).
MAX_PAUSE_MINUTES = 7 * 24 * 60


def _number(form: dict[str, Any], field: str) -> int | None:
    text = str(form.get(field) or "").strip()
    if not text:
        return None
    if not text.isdigit():
        raise ValidationError(field, f"{text!r} is not a whole number")
    return int(text)


def routes(console: Console) -> list[Route]:
    ctx = console.ctx
    limits = ctx.t.limits

    async def show(request: Request, session: Session) -> Response:
        views = await ctx.bridge.run(limits.list)
        waiting = metrics.by_label(metrics.LIMIT_WAITING, "key")
        return console.render(request, session, "limits.html", limits=views,
                              waiting={k: int(v) for k, v in waiting.items()},
                              now=ctx.t.clock.now_ms())

    async def set_limit(request: Request, session: Session, form: dict[str, Any]) -> str:
        key = str(form.get("key") or "").strip()
        rate = str(form.get("rate") or "").strip() or None
        concurrency, burst = _number(form, "concurrency"), _number(form, "burst")
        setting = await ctx.bridge.run(lambda: limits.set(
            key, rate=rate, concurrency=concurrency, burst=burst))
        return f"Limit {setting.key} set: " + ", ".join(
            part for part in (f"rate {setting.rate}" if setting.rate else "",
                              f"burst {setting.burst}" if setting.burst else "",
                              f"{setting.concurrency} at once" if setting.concurrency else "")
            if part) + "."

    async def pause(request: Request, session: Session, form: dict[str, Any]) -> str:
        key = str(form.get("key") or "")
        minutes = _number(form, "minutes")
        if minutes is None or not 1 <= minutes <= MAX_PAUSE_MINUTES:
            raise ValidationError("minutes", f"from 1 to {MAX_PAUSE_MINUTES}")
        until = ctx.t.clock.now_ms() + minutes * 60_000
        await ctx.bridge.run(limits.pause, key, until)
        return f"Paused {key} for {minutes} min."

    async def resume(request: Request, session: Session, form: dict[str, Any]) -> str:
        key = str(form.get("key") or "")
        await ctx.bridge.run(limits.resume, key)
        return f"Resumed {key}."

    async def delete(request: Request, session: Session, form: dict[str, Any]) -> str:
        key = str(form.get("key") or "")
        await ctx.bridge.run(limits.delete, key)
        return f"Deleted the limit {key}."

    return [
        Route("/limits", page(console, show)),
        Route("/limits/set", action(console, "admin", set_limit), methods=["POST"]),
        Route("/limits/pause", action(console, "admin", pause), methods=["POST"]),
        Route("/limits/resume", action(console, "admin", resume), methods=["POST"]),
        Route("/limits/delete", action(console, "admin", delete), methods=["POST"]),
    ]
