"""Native API: a queue's push subscription (`tidings.push`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response, status
from pydantic import BaseModel, ConfigDict, Field

from tidings.model.push import DEFAULT_CONCURRENCY
from tidings.push.service import SubscriptionView
from tidings.push.trial import send_test_push as push_once
from tidings.server.native.deps import Ctx, errors

router = APIRouter(prefix="/v1", tags=["push"])


class SubscribeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    endpoint: str = Field(description="The http(s) URL each message is POSTed to.")
    concurrency: int = Field(default=DEFAULT_CONCURRENCY,
                             description="Pushes at once, every node together (1-1000).")
    rate: str | None = Field(default=None, description="At most this many pushes a second, "
                             "minute or hour (`100/s`, `600/m`); none: no limit.")
    timeout: str | None = Field(default=None, description="`30s` (default), `500ms`, `2m`.")
    paused: bool = Field(default=False, description="Create it paused.")


class UpdateSubscriptionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    endpoint: str | None = None
    concurrency: int | None = None
    rate: str | None = Field(default=None, description="`none` removes the limit.")
    timeout: str | None = None


class RotateIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    grace_s: float | None = Field(default=None, description="How long the old secret still "
                                  "signs beside the new one (default 24 h).")


class SubscriptionOut(BaseModel):
    queue: str
    endpoint: str
    concurrency: int
    rate: str | None
    timeout_ms: int
    state: str = Field(description="active or paused.")
    held_until: int | None = Field(description="Paused by an endpoint's Retry-After "
                                   "until this instant (epoch ms).")
    created_at: int
    modified_at: int
    previous_secret_until: int | None
    secret: str | None = Field(default=None, description="Only when created or rotated.")


class SubscriptionListOut(BaseModel):
    subscriptions: list[SubscriptionOut]


class FailureOut(BaseModel):
    at: int
    message_id: str
    status: int | None
    error: str


class FailureListOut(BaseModel):
    failures: list[FailureOut]


class TestPushOut(BaseModel):
    ok: bool
    status: int | None
    error: str


def _view(v: SubscriptionView, secret: bool = False) -> dict[str, Any]:
    return v.to_json(secret=secret)


@router.post("/queues/{name}/subscription", status_code=status.HTTP_201_CREATED,
             response_model=SubscriptionOut, responses=errors(400, 404, 409))
async def subscribe(name: str, body: SubscribeIn, ctx: Ctx) -> dict[str, Any]:
    """Push the queue's messages to an endpoint. The answer holds the signing secret: the
    only time it is shown."""
    view = await ctx.bridge.run(ctx.t.push.subscribe, name, body.endpoint,
                                concurrency=body.concurrency, rate=body.rate,
                                timeout=body.timeout, paused=body.paused)
    return _view(view, secret=True)


@router.get("/subscriptions", response_model=SubscriptionListOut)
async def list_subscriptions(ctx: Ctx) -> dict[str, Any]:
    """Every queue's push subscription."""
    views = await ctx.bridge.run(ctx.t.push.subscriptions)
    return {"subscriptions": [_view(v) for v in views]}


@router.get("/queues/{name}/subscription", response_model=SubscriptionOut,
            responses=errors(404))
async def get_subscription(name: str, ctx: Ctx) -> dict[str, Any]:
    return _view(await ctx.bridge.run(ctx.t.push.get, name))


@router.patch("/queues/{name}/subscription", response_model=SubscriptionOut,
              responses=errors(400, 404))
async def update_subscription(name: str, body: UpdateSubscriptionIn, ctx: Ctx,
                              ) -> dict[str, Any]:
    """Change what the body gives; `"rate": "none"` removes the rate limit."""
    clear = body.rate == "none"
    view = await ctx.bridge.run(lambda: ctx.t.push.update(
        name, endpoint=body.endpoint, concurrency=body.concurrency,
        rate=None if clear else body.rate, timeout=body.timeout, clear_rate=clear))
    return _view(view)


@router.post("/queues/{name}/subscription/pause", response_model=SubscriptionOut,
             responses=errors(404))
async def pause_subscription(name: str, ctx: Ctx) -> dict[str, Any]:
    return _view(await ctx.bridge.run(ctx.t.push.pause, name))


@router.post("/queues/{name}/subscription/resume", response_model=SubscriptionOut,
             responses=errors(404))
async def resume_subscription(name: str, ctx: Ctx) -> dict[str, Any]:
    """Push again; also lifts a hold an endpoint's Retry-After put on it."""
    return _view(await ctx.bridge.run(ctx.t.push.resume, name))


@router.post("/queues/{name}/subscription/rotate-secret", response_model=SubscriptionOut,
             responses=errors(400, 404))
async def rotate_secret(name: str, ctx: Ctx, body: RotateIn | None = None) -> dict[str, Any]:
    """A new signing secret (shown in the answer); the old one signs beside it for the
    grace period."""
    grace = body.grace_s if body else None
    view = await ctx.bridge.run(lambda: ctx.t.push.rotate_secret(name, grace_s=grace))
    return _view(view, secret=True)


@router.delete("/queues/{name}/subscription", status_code=status.HTTP_204_NO_CONTENT,
               responses=errors(404))
async def delete_subscription(name: str, ctx: Ctx) -> Response:
    await ctx.bridge.run(ctx.t.push.delete, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/queues/{name}/subscription/failures", response_model=FailureListOut,
            responses=errors(404))
async def subscription_failures(name: str, ctx: Ctx, limit: int = 20) -> dict[str, Any]:
    """The last failed pushes, the most recent first."""
    found = await ctx.bridge.run(ctx.t.push.failures, name, min(max(limit, 1), 50))
    return {"failures": [{"at": f.at, "message_id": f.message_id, "status": f.status,
                          "error": f.error} for f in found]}


@router.post("/queues/{name}/subscription/test", response_model=TestPushOut,
             responses=errors(404))
async def send_test_push(name: str, ctx: Ctx) -> dict[str, Any]:
    """POST a made-up, signed message to the endpoint once, and say what it answered."""
    answer = await push_once(ctx.t.push, name)
    return {"ok": answer.ok, "status": answer.status, "error": answer.error}
