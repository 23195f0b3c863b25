"""Native API: send, receive (long polling), delete and change visibility of messages."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response, status
from pydantic import JsonValue

from tidings.clock import to_ms
from tidings.errors import ValidationError
from tidings.model.messages import OutgoingMessage, validate_batch_ids
from tidings.model.queues import MAX_RETENTION_S
from tidings.queues.service import BatchFailure
from tidings.server.native.deps import Ctx, NextToken, errors
from tidings.server.native.models import (
    BatchOut,
    DeleteBatchIn,
    PeekOut,
    ReceiveOut,
    SendBatchEntryIn,
    SendBatchIn,
    SendBatchOut,
    SendIn,
    SendOut,
    VisibilityBatchIn,
    VisibilityIn,
)
from tidings.server.native.rules import (
    PageOf1000,
    QueueName,
    ReceiveMax,
    VisibilityQuery,
    WaitQuery,
)
from tidings.server.native.views import (
    failure_json,
    message_json,
    parse_attributes,
    peeked_json,
    send_json,
)

router = APIRouter(prefix="/v1/queues/{name}", tags=["messages"])


#: The native API lets a message wait up to its queue's retention period (SQS: 15 minutes).
#: The engine caps the delay at the queue's own retention, so the largest retention stands
#: for "the queue's retention" without reading the queue first.
NATIVE_MAX_DELAY_S = MAX_RETENTION_S


def _body_text(body: JsonValue) -> str:
    if isinstance(body, str):
        return body
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def _outgoing(msg: SendIn | SendBatchEntryIn, entry_id: str | None = None) -> OutgoingMessage:
    return OutgoingMessage(_body_text(msg.body), msg.delay_seconds,
                           parse_attributes({k: v.model_dump() for k, v in msg.attributes.items()}),
                           msg.group_id, msg.deduplication_id, entry_id,
                           None if msg.deliver_at is None else to_ms(msg.deliver_at,
                                                                     "deliver_at"))


@router.post("/messages", status_code=status.HTTP_201_CREATED, response_model=SendOut,
             responses=errors(400, 404))
async def send_message(name: QueueName, body: SendIn, ctx: Ctx) -> dict[str, Any]:
    """Send one message."""
    msg = _outgoing(body)
    result = await ctx.coalescer.send(name, msg,
                                                            max_delay_s=NATIVE_MAX_DELAY_S)
    return send_json(result)


@router.post("/messages:batch", response_model=SendBatchOut,
             responses=errors(400, 404))
async def send_batch(name: QueueName, body: SendBatchIn, ctx: Ctx) -> dict[str, Any]:
    """Send 1-10 messages; each entry succeeds or fails on its own (see `failed`). A
    malformed batch as a whole (no entries, repeated ids) is a 400."""
    validate_batch_ids([e.id for e in body.entries])  # the batch as a whole, before entries
    messages: list[OutgoingMessage] = []
    early: list[BatchFailure] = []
    for entry in body.entries:
        try:
            messages.append(_outgoing(entry, entry.id))
        except ValidationError as exc:
            early.append(BatchFailure(entry.id, "InvalidParameterValue", exc.message))
    if not messages:
        # Every entry failed here; a missing queue must still be a 404, as when some pass.
        await ctx.bridge.run(ctx.t.queues.get_queue, name)
        return {"successful": [], "failed": [failure_json(f) for f in early]}
    results, failures = await ctx.coalescer.send_batch(
        name, messages, max_delay_s=NATIVE_MAX_DELAY_S)
    return {"successful": [send_json(r) for r in results],
            "failed": [failure_json(f) for f in [*early, *failures]]}


@router.get("/peek", response_model=PeekOut, responses=errors(400, 404))
async def peek_messages(
    name: QueueName, ctx: Ctx,
    limit: Annotated[PageOf1000, Query(description="Up to this many (1-1000).")] = 10,
    next_token: NextToken = None,
) -> dict[str, Any]:
    """Read messages in the order a receive would take them, without receiving them: no
    visibility change, no receive counted (for inspecting a dead-letter queue)."""
    views, token = await ctx.bridge.run(
        lambda: ctx.t.queues.peek(name, limit=limit, next_token=next_token))
    return {"messages": [peeked_json(v) for v in views], "next_token": token}


@router.get("/messages", response_model=ReceiveOut, responses=errors(400, 404))
async def receive_messages(
    name: QueueName, ctx: Ctx,
    max_messages: Annotated[ReceiveMax, Query(alias="max",
                                              description="Up to this many (1-10).")] = 1,
    wait: Annotated[WaitQuery | None, Query(
        description="Long poll: seconds to wait for a message (0-20). Default: the queue's "
        "receive_wait_s.")] = None,
    visibility_timeout: Annotated[VisibilityQuery | None, Query(
        description="Seconds the messages stay invisible (0-43200). Default: the queue's.")]
    = None,
) -> dict[str, Any]:
    """Receive messages, waiting up to `wait` seconds for the first one to arrive."""
    got = await ctx.coalescer.receive(name, max_messages, wait_s=wait,
                                      visibility_s=visibility_timeout)
    return {"messages": [message_json(m) for m in got]}


@router.delete("/messages/{receipt_handle}", status_code=status.HTTP_204_NO_CONTENT,
               responses=errors(400, 404))
async def delete_message(name: QueueName, receipt_handle: str, ctx: Ctx) -> Response:
    """Delete a received message. A handle from an earlier receive succeeds without deleting
    (the message now belongs to its latest receiver), as in SQS."""
    await ctx.coalescer.delete(name, receipt_handle)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/messages:delete", response_model=BatchOut, responses=errors(400, 404))
async def delete_batch(name: QueueName, body: DeleteBatchIn, ctx: Ctx) -> dict[str, Any]:
    """Delete 1-10 received messages; each entry succeeds or fails on its own."""
    ok, failures = await ctx.bridge.run(ctx.t.queues.delete_batch, name,
                                        [(e.id, e.receipt_handle) for e in body.entries])
    return {"successful": [{"id": i} for i in ok], "failed": [failure_json(f) for f in failures]}


@router.post("/messages:visibility", status_code=status.HTTP_204_NO_CONTENT,
             responses=errors(400, 404))
async def change_visibility(name: QueueName, body: VisibilityIn, ctx: Ctx) -> Response:
    """Set how long a received message stays invisible, counted from now; 0 makes it
    visible again at once. The message must still be in flight (MessageNotInflight)."""
    await ctx.bridge.run(ctx.t.queues.change_visibility, name, body.receipt_handle,
                         body.visibility_timeout)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/messages:visibility-batch", response_model=BatchOut,
             responses=errors(400, 404))
async def change_visibility_batch(name: QueueName, body: VisibilityBatchIn,
                                  ctx: Ctx) -> dict[str, Any]:
    """Change the visibility of 1-10 messages; each entry succeeds or fails on its own."""
    ok, failures = await ctx.bridge.run(
        ctx.t.queues.change_visibility_batch, name,
        [(e.id, e.receipt_handle, e.visibility_timeout) for e in body.entries])
    return {"successful": [{"id": i} for i in ok], "failed": [failure_json(f) for f in failures]}
