"""`/v1/limits`: downstream limits, read and changed live (every node obeys a change
within a second). Changes need the admin scope and go into the audit log."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Response, status
from pydantic import ConfigDict, Field, model_validator

from tidings.clock import iso, to_ms
from tidings.limits.service import MAX_PAUSE_MS
from tidings.server.errors import FieldRule
from tidings.server.native.deps import Ctx, Responses
from tidings.server.native.rules import (
    AwareInstant,
    In,
    LimitCount,
    LimitKey,
    LimitRate,
    any_of,
    exactly_one_of,
)

router = APIRouter(prefix="/v1/limits", tags=["limits"])

_DOCS: Responses = {
    400: {"description": "Bad input: code InvalidParameterValue, `error.field` naming it."},
    404: {"description": "No limit is set or in use under this key (NotFound)."},
}

#: A pause's length: more than nothing, at most the year (and a day) the engine allows.
PauseSeconds = Annotated[float, Field(ge=0.001, le=MAX_PAUSE_MS / 1000)]


def _rate_or_concurrency() -> dict[str, Any]:
    # a rate or a concurrency (or both); a burst only with a rate
    return {"allOf": [any_of("rate", "concurrency"),
                      {"anyOf": [{"properties": {"burst": {"type": "null"}}},
                                 {"not": {"required": ["burst"]}}, any_of("rate")]}]}


class LimitIn(In):
    model_config = ConfigDict(json_schema_extra=_rate_or_concurrency())

    rate: LimitRate | None = Field(
        None, description="N per period: '200/s', '1000/min', '20/h', '5/10s' (a period of "
        "1 ms to 7 days).")
    concurrency: LimitCount | None = Field(None, description="At most this many at once "
                                           "(1-1000000).")
    burst: LimitCount | None = Field(None, description="With a rate: a bucket of this size "
                                     "(1-1000000).")

    @model_validator(mode="after")
    def _something(self) -> LimitIn:
        if self.rate is None and self.concurrency is None:
            raise FieldRule("rate", "give a rate, a concurrency, or both")
        if self.burst is not None and self.rate is None:
            raise FieldRule("burst", "a burst needs a rate")
        return self


class PauseIn(In):
    model_config = ConfigDict(json_schema_extra=exactly_one_of("until", "seconds"))

    until: AwareInstant | None = Field(
        None, description="RFC 3339 instant with its offset, within a year from now.")
    seconds: PauseSeconds | None = Field(None, description="Or: for this many seconds "
                                         "(0.001 up to 366 days).")

    @model_validator(mode="after")
    def _one(self) -> PauseIn:
        if (self.until is None) == (self.seconds is None):
            raise FieldRule("until", "give until or seconds, not both")
        return self


def views_json(views: list[Any]) -> dict[str, Any]:
    return {"limits": [v.as_json() for v in views]}


@router.get("")
async def list_limits(ctx: Ctx) -> dict[str, Any]:
    """Every limit setting, pause and key in use: its rate, concurrency, slots in use,
    starts within its window and pause."""
    return views_json(await ctx.bridge.run(ctx.t.limits.list))


@router.get("/{key}", responses=_DOCS)
async def get_limit(key: LimitKey, ctx: Ctx) -> dict[str, Any]:
    view = await ctx.bridge.run(ctx.t.limits.get, key)
    out: dict[str, Any] = view.as_json()
    return out


@router.put("/{key}", responses=_DOCS)
async def set_limit(key: LimitKey, body: LimitIn, ctx: Ctx) -> dict[str, Any]:
    """Replace the setting of a limit's name (for every key under it) or of one key
    (`name:value`, over its name's)."""
    setting = await ctx.bridge.run(lambda: ctx.t.limits.set(
        key, rate=body.rate, concurrency=body.concurrency, burst=body.burst))
    return setting.as_json()


@router.delete("/{key}", status_code=status.HTTP_204_NO_CONTENT, responses=_DOCS)
async def delete_limit(key: LimitKey, ctx: Ctx) -> Response:
    await ctx.bridge.run(ctx.t.limits.delete, key)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{key}/pause", responses=_DOCS)
async def pause_limit(key: LimitKey, body: PauseIn, ctx: Ctx) -> dict[str, Any]:
    """Hold back every job of the key (of a name: of all its keys) until the instant."""
    if body.until is not None:
        until = to_ms(body.until)
    else:
        until = ctx.t.clock.now_ms() + int((body.seconds or 0) * 1000)
    paused = await ctx.bridge.run(ctx.t.limits.pause, key, until)
    return {"key": key, "paused_until": iso(paused)}


@router.post("/{key}/resume", status_code=status.HTTP_204_NO_CONTENT, responses=_DOCS)
async def resume_limit(key: LimitKey, ctx: Ctx) -> Response:
    await ctx.bridge.run(ctx.t.limits.resume, key)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
