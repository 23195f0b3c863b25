"""`/v1/limits`: downstream limits, read and changed live (every node obeys a change
within a second). Changes need the admin scope and go into the audit log."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Response, status
from pydantic import BaseModel, ConfigDict, Field

from tidings.clock import iso, to_ms
from tidings.errors import ValidationError
from tidings.server.native.deps import Ctx

router = APIRouter(prefix="/v1/limits", tags=["limits"])


class LimitIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rate: str | None = Field(None, description="N per period: '200/s', '1000/min', '20/h'.")
    concurrency: int | None = Field(None, description="At most this many at once.")
    burst: int | None = Field(None, description="With a rate: a bucket of this size.")


class PauseIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    until: datetime | None = Field(None, description="ISO 8601 instant with its offset.")
    seconds: float | None = Field(None, gt=0, description="Or: for this many seconds.")


def views_json(views: list[Any]) -> dict[str, Any]:
    return {"limits": [v.as_json() for v in views]}


@router.get("")
async def list_limits(ctx: Ctx) -> dict[str, Any]:
    """Every limit setting, pause and key in use: its rate, concurrency, slots in use,
    starts within its window and pause."""
    return views_json(await ctx.bridge.run(ctx.t.limits.list))


@router.get("/{key}")
async def get_limit(key: str, ctx: Ctx) -> dict[str, Any]:
    view = await ctx.bridge.run(ctx.t.limits.get, key)
    out: dict[str, Any] = view.as_json()
    return out


@router.put("/{key}")
async def set_limit(key: str, body: LimitIn, ctx: Ctx) -> dict[str, Any]:
    """Replace the setting of a limit's name (for every key under it) or of one key
    (`name:value`, over its name's)."""
    setting = await ctx.bridge.run(lambda: ctx.t.limits.set(
        key, rate=body.rate, concurrency=body.concurrency, burst=body.burst))
    return setting.as_json()


@router.delete("/{key}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_limit(key: str, ctx: Ctx) -> Response:
    await ctx.bridge.run(ctx.t.limits.delete, key)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{key}/pause")
async def pause_limit(key: str, body: PauseIn, ctx: Ctx) -> dict[str, Any]:
    """Hold back every job of the key (of a name: of all its keys) until the instant."""
    if (body.until is None) == (body.seconds is None):
        raise ValidationError("until", "give until or seconds")
    if body.until is not None:
        if body.until.utcoffset() is None:
            raise ValidationError("until", "needs a UTC offset (e.g. Z or +01:00)")
        until = to_ms(body.until)
    else:
        until = ctx.t.clock.now_ms() + int((body.seconds or 0) * 1000)
    paused = await ctx.bridge.run(ctx.t.limits.pause, key, until)
    return {"key": key, "paused_until": iso(paused)}


@router.post("/{key}/resume", status_code=status.HTTP_204_NO_CONTENT)
async def resume_limit(key: str, ctx: Ctx) -> Response:
    await ctx.bridge.run(ctx.t.limits.resume, key)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
