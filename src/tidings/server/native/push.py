"""Native API: a queue's push subscription (`tidings.push`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response, status
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from tidings.model.push import DEFAULT_CONCURRENCY
from tidings.push.service import SubscriptionView
from tidings.push.trial import send_test_push as push_once
from tidings.server.native.deps import Ctx, errors
from tidings.server.native.grammars import PUSH_RATE, PUSH_TIMEOUT
from tidings.server.native.rules import WEBHOOK_URL, In, PushConcurrency, QueueName, any_of, say

router = APIRouter(prefix="/v1", tags=["push"])

#: The URL each message is POSTed to (the webhook targets' rule: http(s) and a host).
Endpoint = Annotated[str, StringConstraints(max_length=2048, pattern=WEBHOOK_URL)]
PushRate = Annotated[str, StringConstraints(pattern=say(
    PUSH_RATE, "must be pushes a second (5) or per unit: 100/s, 600/m or 3600/h"))]
PushTimeout = Annotated[str, StringConstraints(pattern=say(
    PUSH_TIMEOUT, "must be 30s, 500ms, 2m or seconds, from 1 ms to 15 minutes"))]
#: How long a rotated-out secret still signs: up to 30 days.
MAX_GRACE_S = 30 * 86_400
Grace = Annotated[float, Field(ge=0, le=MAX_GRACE_S)]
#: Failures listed at once: the pushers keep the last 50.
FailuresPage = Annotated[int, Field(ge=1, le=50)]


class SubscribeIn(In):
    endpoint: Endpoint = Field(description="The http(s) URL each message is POSTed to (the "
                               "node's webhook allow-list applies).")
    concurrency: PushConcurrency = Field(default=DEFAULT_CONCURRENCY,
                                     description="Pushes at once, every node together (1-1000).")
    rate: PushRate | None = Field(default=None, description="At most this many pushes a "
                                  "second (`5`), or per unit (`100/s`, `600/m`, `20/h`); null: "
                                  "no limit.")
    timeout: PushTimeout | None = Field(default=None, description="`30s` (default), `500ms`, "
                                        "`2m`, or seconds: 1 ms to 15 minutes.")
    paused: bool = Field(default=False, description="Create it paused.")


class UpdateSubscriptionIn(In):
    model_config = ConfigDict(
        json_schema_extra=any_of("endpoint", "concurrency", "rate", "timeout"))

    endpoint: Endpoint | None = None
    concurrency: PushConcurrency | None = None
    rate: PushRate | Literal["none"] | None = Field(default=None,
                                                    description="`none` removes the limit.")
    timeout: PushTimeout | None = None


class RotateIn(In):
    grace_s: Grace | None = Field(default=None, description="How long the old secret still "
                                  "signs beside the new one (0-2592000 s; default 24 h).")


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
async def subscribe(name: QueueName, body: SubscribeIn, ctx: Ctx) -> dict[str, Any]:
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
async def get_subscription(name: QueueName, ctx: Ctx) -> dict[str, Any]:
    return _view(await ctx.bridge.run(ctx.t.push.get, name))


@router.patch("/queues/{name}/subscription", response_model=SubscriptionOut,
              responses=errors(400, 404))
async def update_subscription(name: QueueName, body: UpdateSubscriptionIn, ctx: Ctx,
                              ) -> dict[str, Any]:
    """Change what the body gives; `"rate": "none"` removes the rate limit."""
    clear = body.rate == "none"
    view = await ctx.bridge.run(lambda: ctx.t.push.update(
        name, endpoint=body.endpoint, concurrency=body.concurrency,
        rate=None if clear else body.rate, timeout=body.timeout, clear_rate=clear))
    return _view(view)


@router.post("/queues/{name}/subscription/pause", response_model=SubscriptionOut,
             responses=errors(404))
async def pause_subscription(name: QueueName, ctx: Ctx) -> dict[str, Any]:
    return _view(await ctx.bridge.run(ctx.t.push.pause, name))


@router.post("/queues/{name}/subscription/resume", response_model=SubscriptionOut,
             responses=errors(404))
async def resume_subscription(name: QueueName, ctx: Ctx) -> dict[str, Any]:
    """Push again; also lifts a hold an endpoint's Retry-After put on it."""
    return _view(await ctx.bridge.run(ctx.t.push.resume, name))


@router.post("/queues/{name}/subscription/rotate-secret", response_model=SubscriptionOut,
             responses=errors(400, 404))
async def rotate_secret(name: QueueName, ctx: Ctx, body: RotateIn | None = None) -> dict[str, Any]:
    """A new signing secret (shown in the answer); the old one signs beside it for the
    grace period."""
    grace = body.grace_s if body else None
    view = await ctx.bridge.run(lambda: ctx.t.push.rotate_secret(name, grace_s=grace))
    return _view(view, secret=True)


@router.delete("/queues/{name}/subscription", status_code=status.HTTP_204_NO_CONTENT,
               responses=errors(404))
async def delete_subscription(name: QueueName, ctx: Ctx) -> Response:
    await ctx.bridge.run(ctx.t.push.delete, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/queues/{name}/subscription/failures", response_model=FailureListOut,
            responses=errors(404))
async def subscription_failures(
        name: QueueName, ctx: Ctx,
        limit: Annotated[FailuresPage, Query(description="How many (1-50).")] = 20,
) -> dict[str, Any]:
    """The last failed pushes, the most recent first."""
    found = await ctx.bridge.run(ctx.t.push.failures, name, limit)
    return {"failures": [{"at": f.at, "message_id": f.message_id, "status": f.status,
                          "error": f.error} for f in found]}


@router.post("/queues/{name}/subscription/test", response_model=TestPushOut,
             responses=errors(404))
async def send_test_push(name: QueueName, ctx: Ctx) -> dict[str, Any]:
    """POST a made-up, signed message to the endpoint once, and say what it answered."""
    answer = await push_once(ctx.t.push, name)
    return {"ok": answer.ok, "status": answer.status, "error": answer.error}
