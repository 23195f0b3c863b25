"""Native API: queues, their tags, dead-letter sources and redrive (message moves)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response, status

from tidings.model.queues import MoveTask
from tidings.queues.service import QueueService
from tidings.server.native.deps import Ctx, NextToken, errors
from tidings.server.native.models import (
    CreateQueueIn,
    MoveTaskListOut,
    MoveTaskOut,
    PurgeOut,
    QueueAttributesIn,
    QueueListOut,
    QueueNamesOut,
    QueueOut,
    RedriveIn,
    RedriveOut,
    TagsIn,
)
from tidings.server.native.rules import MoveTaskPage, PageOf1000, QueueName
from tidings.server.native.views import move_task_json, queue_json

router = APIRouter(prefix="/v1", tags=["queues"])



def _create_and_describe(q: QueueService, name: str, attributes: dict[str, Any],
                         tags: dict[str, str]) -> dict[str, Any]:
    q.create_queue(name, **attributes, tags=tags)
    info = q.describe(name)
    return queue_json(info.record, info.counts)


def _update_and_describe(q: QueueService, name: str, changes: dict[str, Any]) -> dict[str, Any]:
    q.update_queue(name, **changes)
    info = q.describe(name)
    return queue_json(info.record, info.counts)


def _describe(q: QueueService, name: str) -> dict[str, Any]:
    info = q.describe(name)
    return queue_json(info.record, info.counts)


def _task_json(q: QueueService, tasks: list[MoveTask]) -> list[dict[str, Any]]:
    names = q.queue_names(tasks)
    return [
        move_task_json(task, names.get(task.source_queue_id, str(task.source_queue_id)),
                       None if task.destination_queue_id is None
                       else names.get(task.destination_queue_id))
        for task in tasks
    ]


def _list_tasks(q: QueueService, name: str, limit: int) -> list[dict[str, Any]]:
    return _task_json(q, q.list_move_tasks(name, limit))


def _cancel_task(q: QueueService, handle: str) -> dict[str, Any]:
    task = q.cancel_move_task(handle)
    return _task_json(q, [task])[0]


@router.post("/queues", status_code=status.HTTP_201_CREATED, response_model=QueueOut,
             responses=errors(400, 409))
async def create_queue(body: CreateQueueIn, ctx: Ctx) -> dict[str, Any]:
    """Create a queue. Creating it again with the same attributes returns the same queue."""
    return await ctx.bridge.run(_create_and_describe, ctx.t.queues, body.name,
                                body.attributes.changes(), body.tags)


@router.get("/queues", response_model=QueueListOut, responses=errors(400))
async def list_queues(
    ctx: Ctx,
    prefix: Annotated[str, Query(description="Only queues whose name starts with this.")] = "",
    limit: Annotated[PageOf1000, Query(description="Page size (1-1000).")] = 1000,
    next_token: NextToken = None,
    all: Annotated[bool, Query(description="Also tidings' own queues (tidings-deliveries, "
                               "tidings-email), which clients can look at, not change.")
                   ] = False,
) -> dict[str, Any]:
    """List queues by name, a page at a time."""
    records, token = await ctx.bridge.run(ctx.t.queues.list_queues, prefix, limit=limit,
                                          next_token=next_token, include_internal=all)
    return {"queues": [queue_json(r) for r in records], "next_token": token}


@router.get("/queues/{name}", response_model=QueueOut, responses=errors(404))
async def get_queue(name: QueueName, ctx: Ctx) -> dict[str, Any]:
    """A queue's attributes, tags and approximate message counts."""
    return await ctx.bridge.run(_describe, ctx.t.queues, name)


@router.patch("/queues/{name}", response_model=QueueOut, responses=errors(400, 404))
async def update_queue(name: QueueName, body: QueueAttributesIn, ctx: Ctx) -> dict[str, Any]:
    """Change attributes; those not in the body keep their values. A null redrive_policy
    removes the dead-letter queue."""
    return await ctx.bridge.run(_update_and_describe, ctx.t.queues, name, body.changes())


@router.delete("/queues/{name}", status_code=status.HTTP_204_NO_CONTENT,
               responses=errors(404))
async def delete_queue(name: QueueName, ctx: Ctx) -> Response:
    """Delete a queue and every message in it."""
    await ctx.bridge.run(ctx.t.queues.delete_queue, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/queues/{name}/purge", response_model=PurgeOut,
             responses=errors(403, 404))
async def purge_queue(name: QueueName, ctx: Ctx) -> dict[str, Any]:
    """Delete every message of the queue (at most once every 60 seconds, as SQS)."""
    return {"purged": await ctx.bridge.run(ctx.t.queues.purge_queue, name)}


@router.post("/queues/{name}/tags", status_code=status.HTTP_204_NO_CONTENT,
             responses=errors(400, 404))
async def tag_queue(name: QueueName, body: TagsIn, ctx: Ctx) -> Response:
    """Add tags, or overwrite the values of existing keys."""
    await ctx.bridge.run(ctx.t.queues.tag_queue, name, body.tags)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.delete("/queues/{name}/tags", status_code=status.HTTP_204_NO_CONTENT,
               responses=errors(404))
async def untag_queue(
    name: QueueName, ctx: Ctx,
    keys: Annotated[list[str], Query(description="Tag keys to remove (repeat the parameter).")],
) -> Response:
    """Remove tags by key; absent keys are ignored."""
    await ctx.bridge.run(ctx.t.queues.untag_queue, name, keys)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/queues/{name}/dead-letter-sources", response_model=QueueNamesOut,
            responses=errors(404))
async def dead_letter_sources(name: QueueName, ctx: Ctx) -> dict[str, Any]:
    """The queues whose redrive policy names this queue as their dead-letter queue."""
    records = await ctx.bridge.run(ctx.t.queues.dead_letter_sources, name)
    return {"queues": [r.name for r in records]}


@router.post("/queues/{name}/redrive", response_model=RedriveOut,
             responses=errors(400, 404))
async def redrive(name: QueueName, body: RedriveIn, ctx: Ctx) -> dict[str, Any]:
    """Move messages out of this dead-letter queue: to `destination`, or each back to the
    queue it came from. With `max_per_second`, a background task moves them at that rate
    (see move-tasks); otherwise they all move now."""
    if body.max_per_second is not None:
        handle = await ctx.bridge.run(ctx.t.queues.start_move_task, name, body.destination,
                                      body.max_per_second)
        return {"task_handle": handle, "moved": None}
    moved = await ctx.bridge.run(ctx.t.queues.redrive, name, body.destination)
    return {"moved": moved, "task_handle": None}


@router.get("/queues/{name}/move-tasks", response_model=MoveTaskListOut,
            responses=errors(404))
async def list_move_tasks(
    name: QueueName, ctx: Ctx,
    limit: Annotated[MoveTaskPage, Query(description="How many, newest first (1-10).")
                     ] = 10,
) -> dict[str, Any]:
    """Message move tasks of this dead-letter queue, newest first."""
    return {"tasks": await ctx.bridge.run(_list_tasks, ctx.t.queues, name, limit)}


@router.post("/move-tasks/{handle}/cancel", response_model=MoveTaskOut, responses=errors(400))
async def cancel_move_task(handle: str, ctx: Ctx) -> dict[str, Any]:
    """Stop a running move task; messages already moved stay where they went."""
    return await ctx.bridge.run(_cancel_task, ctx.t.queues, handle)
