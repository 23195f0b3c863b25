"""What every native endpoint needs: the `Tidings` handle, the bridge to its store and the
group commit its sends and deletes share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Query, Request

from tidings.client import Tidings
from tidings.queues.coalesce import Coalescer
from tidings.runtime.bridge import Bridge


@dataclass(frozen=True)
class Context:
    t: Tidings
    bridge: Bridge
    coalescer: Coalescer


def _context(request: Request) -> Context:
    ctx = request.app.state.tidings_context
    assert isinstance(ctx, Context)
    return ctx


#: Endpoint parameter type: `ctx: Ctx`. Store calls go `await ctx.bridge.run(...)`, never
#: straight onto the event loop, where one slow transaction would stall every request.
Ctx = Annotated[Context, Depends(_context)]

#: The query parameter of every paged listing: the token its previous page ended with.
NextToken = Annotated[str | None, Query(description="From the previous page.")]

Responses = dict[int | str, dict[str, Any]]

_ERROR_DOCS: Responses = {
    400: {"description": "Bad input: code InvalidParameterValue with `error.field` naming the "
          "field, or a batch/receipt-handle error (ReceiptHandleIsInvalid, MessageNotInflight)."},
    403: {"description": "The queue was purged less than 60 s ago (PurgeQueueInProgress)."},
    404: {"description": "The queue does not exist (code QueueNotFound)."},
    409: {"description": "A queue of this name exists with other attributes "
          "(ConflictException)."},
}


def errors(*statuses: int) -> Responses:
    """OpenAPI documentation of the error statuses an endpoint can answer."""
    return {s: _ERROR_DOCS[s] for s in statuses}
