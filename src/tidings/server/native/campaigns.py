"""Native API: campaigns (status, pause, resume, cancel, cancel one recipient), fan-out of a
streamed recipient list, and the load forecast.

`POST /v1/campaigns/{name}/fanout` takes the CSV or JSON Lines as the request body and
reads it as it arrives (a bounded buffer between the connection and the fan-out thread),
so memory stays flat whatever the list's size. The fan-out runs in its own thread, not
on the store bridge, so other requests are served meanwhile.
"""

from __future__ import annotations

import asyncio
import io
import queue
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field, StringConstraints

from tidings.campaigns.fanout import FanoutOptions
from tidings.campaigns.fanout_source import Columns
from tidings.campaigns.fanout_timing import parse_date, parse_step
from tidings.campaigns.limited import DEFAULT_MEAN_DURATION_MS
from tidings.campaigns.service import CampaignService, CampaignView
from tidings.errors import NotFoundError
from tidings.server.native.campaign_views import campaign_json, recipient_json
from tidings.server.native.deps import Ctx, Responses
from tidings.server.native.rules import (
    BucketMinutes,
    ContactListName,
    DateText,
    ForecastHours,
    MeanDurationMs,
    PageOf1000,
    QuietHours,
    ScheduleName,
    StepText,
    TemplateName,
    TimeOfDay,
)
from tidings.server.native.send_models import SesAddress

router = APIRouter(prefix="/v1", tags=["campaigns"])

_DOCS: Responses = {
    400: {"description": "Bad input: code InvalidParameterValue, `error.field` naming it."},
    404: {"description": "No such campaign (NotFound) or template (TemplateNotFound)."},
}


class _BodyReader(io.RawIOBase):
    """Bytes the event loop receives, read by the fan-out thread; None marks the end."""

    def __init__(self) -> None:
        self.chunks: queue.Queue[bytes | None] = queue.Queue(maxsize=64)
        self._left = b""
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._left and not self._done:
            chunk = self.chunks.get()
            if chunk is None:
                self._done = True
            else:
                self._left = chunk
        n = min(len(buffer), len(self._left))
        buffer[:n] = self._left[:n]
        self._left = self._left[n:]
        return n


async def _feed(request: Request, reader: _BodyReader) -> None:
    async def put(item: bytes | None) -> None:
        while True:
            try:
                reader.chunks.put_nowait(item)
                return
            except queue.Full:  # the fan-out is behind: wait for it, without blocking
                await asyncio.sleep(0.002)

    try:
        async for chunk in request.stream():
            if chunk:
                await put(chunk)
    finally:
        await put(None)


@router.get("/campaigns", summary="List campaigns")
async def list_campaigns(ctx: Ctx, limit: PageOf1000 = 100, after: str | None = None,
                         ) -> dict[str, Any]:
    records = await ctx.bridge.run(lambda: ctx.t.campaigns.list(after=after, limit=limit))
    return {"campaigns": [campaign_json(r) for r in records]}


def _acting(action: Callable[[CampaignService, str], CampaignView],
            ) -> Callable[[str, Ctx], Awaitable[dict[str, Any]]]:
    """status, pause, resume and cancel: one campaign in, its view out."""
    async def endpoint(name: str, ctx: Ctx) -> dict[str, Any]:
        return (await ctx.bridge.run(action, ctx.t.campaigns, name)).to_json()
    return endpoint


# `name` keeps each operation's id in the OpenAPI document what it was as a function.
router.get("/campaigns/{name}", name="campaign_status", summary="Campaign status and counts",
           responses=_DOCS)(_acting(CampaignService.status))
router.post("/campaigns/{name}/pause", name="pause", summary="Disable the remaining schedules",
            responses=_DOCS)(_acting(CampaignService.pause))
router.post("/campaigns/{name}/resume", name="resume", summary="Enable the schedules again",
            responses=_DOCS)(_acting(CampaignService.resume))
router.post("/campaigns/{name}/cancel", name="cancel",
            summary="Delete the remaining schedules (final)",
            responses=_DOCS)(_acting(CampaignService.cancel))


@router.get("/campaigns/{name}/recipients/{recipient_id}",
            summary="One recipient's steps and what they delivered", responses=_DOCS)
async def recipient(name: str, recipient_id: str, ctx: Ctx) -> dict[str, Any]:
    """Each step of the recipient: when a pending one fires, what a fired one delivered.
    The id is matched exactly (u1 is not u10); one the campaign never knew is a 404."""
    steps = await ctx.bridge.run(ctx.t.campaigns.recipient, name, recipient_id)
    if not steps:
        raise NotFoundError(recipient_id, f"campaign {name!r} has no recipient "
                            f"{recipient_id!r} (no pending step, no delivery)")
    return recipient_json(name, recipient_id, steps)


@router.post("/campaigns/{name}/recipients/{recipient_id}/cancel",
             summary="Delete one recipient's remaining steps", responses=_DOCS)
async def cancel_recipient(name: str, recipient_id: str, ctx: Ctx) -> dict[str, Any]:
    removed = await ctx.bridge.run(ctx.t.campaigns.cancel_recipient, name, recipient_id)
    return {"campaign": name, "recipient": recipient_id, "removed": removed}


#: The fan-out's body: the recipient list, one row per recipient (its columns are the
#: campaign's to choose: `id_column`, `email_column`, ... and the template's variables).
_FANOUT_BODY: dict[str, Any] = {"requestBody": {"required": True, "content": {
    "text/csv": {"schema": {"type": "string"}},
    "application/x-ndjson": {"schema": {"type": "string"}}}}}
Column = Annotated[str, StringConstraints(min_length=1, max_length=256)]


@router.post("/campaigns/{name}/fanout", summary="Fan a recipient list out into schedules",
             responses=_DOCS, openapi_extra=_FANOUT_BODY)
async def fanout(
    name: ScheduleName, request: Request, ctx: Ctx,
    template: Annotated[TemplateName, Query(description="The campaign's template.")],
    sender: Annotated[SesAddress, Query(alias="from", description="The sender's address.")],
    local_time: Annotated[TimeOfDay | None, Query(
        description="HH:MM[:SS] local to each recipient, on `on`.")] = None,
    on: Annotated[DateText | None, Query(description="YYYY-MM-DD, with local_time.")] = None,
    next: Annotated[TimeOfDay | None, Query(  # noqa: A002 - the CLI's name
        description="Or: the next HH:MM[:SS] local to each recipient.")] = None,
    at_column: Annotated[Column | None, Query(
        description="Or: the column holding each recipient's instant.")] = None,
    step: Annotated[list[StepText] | None, Query(
        description="name:day[:HH:MM[:template]], each name once (default: one step).")]
    = None,
    tz_column: Column = "timezone", id_column: Column = "id", email_column: Column = "email",
    quiet_hours: Annotated[QuietHours | None, Query(
        description="HH:MM-HH:MM local: no step fires in it.")] = None,
    flexible_window: Annotated[int | None, Query(ge=1, le=1440)] = None,
    max_error_percent: Annotated[float | None, Query(ge=0, le=100)] = None,
    max_errors: Annotated[int | None, Query(ge=0)] = None,
    format: Literal["csv", "jsonl"] | None = None,  # noqa: A002 - the CLI's name
    contact_list: Annotated[ContactListName | None, Query(
        description="Send to this contact list (its opt-outs apply).")] = None,
    topic: Annotated[ContactListName | None, Query(
        description="And this topic of it.")] = None,
) -> dict[str, Any]:
    """The body is CSV (with a header) or JSON Lines (`format`, else from Content-Type).
    Give one timing: `local_time` with `on`, `next`, or `at_column`. Answers the summary,
    with up to 20 bad rows in `error_sample`."""
    if format is None:
        kind = request.headers.get("content-type", "")
        format = "jsonl" if "json" in kind else "csv"
    opts = FanoutOptions(
        campaign=name, template=template, sender=sender,
        steps=tuple(parse_step(s) for s in step or ()),
        on=parse_date("on", on) if on else None, local_time=local_time, next_time=next,
        columns=Columns(id=id_column, email=email_column, timezone=tz_column, at=at_column),
        quiet_hours=quiet_hours, flexible_window_minutes=flexible_window,
        max_errors=max_errors, max_error_percent=max_error_percent, format=format,
        contact_list=contact_list, topic=topic)
    reader = _BodyReader()
    feeding = asyncio.create_task(_feed(request, reader))
    try:
        # A long call: the bridge's long-call threads, not the store's (runtime/bridge.py).
        summary = await ctx.bridge.run_long(ctx.t.campaigns.fanout, io.BufferedReader(reader),
                                            opts)
    finally:
        if not feeding.done():
            feeding.cancel()
            while True:  # unblock nothing: the thread is done; drop what is buffered
                try:
                    reader.chunks.get_nowait()
                except queue.Empty:
                    break
    return summary.to_json()


class LimitedOut(BaseModel):
    key: str = Field(description="A limit key some firings count against "
                     "(`queue:<name>`, `webhook:<host>`, `function:<name>`, `smtp:<relay>`, "
                     "`email-domain:<domain>`).")
    rate: str | None = Field(description="Its rate, e.g. `50/s` (null: none).")
    concurrency: int | None = Field(description="Its concurrency (null: none).")
    paused_until_ms: int | None = Field(description="Paused until then (epoch ms): nothing "
                                        "starts before; null: not paused.")
    mean_duration_ms: int | None = Field(description="How long the estimate assumed each "
                                         "start holds a concurrency slot; null: no "
                                         "concurrency counted.")
    firings: int = Field(description="Firings due within the horizon that count against it.")
    started: list[int] = Field(description="Per bucket: how many the key lets start.")
    drains_at_ms: int | None = Field(description="The end of the bucket in which the last "
                                     "one starts (epoch ms); null: after the horizon.")


class ForecastOut(BaseModel):
    start_ms: int
    bucket_ms: int
    buckets: int
    occurrences: dict[str, list[int]] = Field(description="By target kind, at occurrence.")
    firings: dict[str, list[int]] = Field(description="By target kind, when due (after "
                                          "flexible windows).")
    email_rate_per_s: float
    email_sent: list[int]
    limited: list[LimitedOut] = Field(description="Per limit key with a rate, a "
                                      "concurrency or a pause: when its firings start and "
                                      "drain.")


@router.get("/forecast", summary="Planned firings per minute over a horizon",
            response_model=ForecastOut)
async def forecast(ctx: Ctx, hours: ForecastHours = 48,
                   bucket_minutes: BucketMinutes = 1,
                   mean_duration_ms: MeanDurationMs = DEFAULT_MEAN_DURATION_MS
                   ) -> dict[str, Any]:
    fc = await ctx.bridge.run(lambda: ctx.t.campaigns.forecast(
        hours, bucket_minutes=bucket_minutes, mean_duration_ms=mean_duration_ms))
    return fc.to_json()
