"""Function targets: a registered Python callable runs at the due time ("the Lambda before
dispatch" of the per-recipient pattern). It receives a `FunctionEvent` and may:

- return None: the function was the whole target (or, with a `then` target, deliver the
  original input there);
- return a new input (str, or a JSON-able value): enrich, delivered to `then`;
- return `Suppress(reason)`: deliver nothing;
- return `Route(target, input=None)`: deliver to another target (a queue name or a
  `Target`) instead.

Raising an exception is a retryable failure (the schedule's retry policy applies).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Container, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from tidings.model.firings import FiringContext
from tidings.model.queues import DELIVERY_QUEUE
from tidings.model.schedules import Target as TargetSpec
from tidings.model.schedules import TargetKind
from tidings.targets.base import (
    Attempt,
    DeliveryError,
    LimitPlace,
    Outcomes,
    Reach,
    Route,
    Suppress,
    TargetChecks,
    one_by_one,
)


@dataclass(frozen=True)
class FunctionEvent:
    input: Any  # the input, parsed as JSON when it is JSON, else the text
    raw_input: str
    schedule: str  # group/name
    scheduled_time: int  # epoch ms
    execution_id: str
    attempt: int


def event_for(body: str, ctx: FiringContext, attempt: int) -> FunctionEvent:
    try:
        parsed: Any = json.loads(body)
    except json.JSONDecodeError:
        parsed = body
    return FunctionEvent(parsed, body, f"{ctx.group}/{ctx.name}", ctx.scheduled_time,
                         ctx.execution_id, attempt)


def as_input(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


class FunctionTarget:
    kind: ClassVar[TargetKind] = TargetKind.FUNCTION
    writes_queue: ClassVar[bool] = False
    delivery_queue: ClassVar[str] = DELIVERY_QUEUE
    checks_input: ClassVar[bool] = False
    input_limits: ClassVar[tuple[str, ...]] = ()
    logs_deliveries: ClassVar[bool] = False
    native_fields: ClassVar[bool] = True

    def validate(self, target: TargetSpec, checks: TargetChecks) -> bool:
        """Nothing to check: the function is registered on the app of the node that
        delivers (a node without it retries, as for a queue not created yet)."""
        return True

    def limit_keys(self, target: TargetSpec, body: str | None, place: LimitPlace,
                   wanted: Container[str]) -> dict[str, str]:
        return {"function": target.destination} if "function" in wanted else {}

    def aws_arn(self, target: TargetSpec, region: str, account: str) -> str:
        return f"arn:aws:lambda:{region}:{account}:function:{target.destination}"

    async def deliver(self, batch: Sequence[Attempt], reach: Reach) -> Outcomes:
        return await one_by_one(batch, lambda a: self._call(a, reach))

    async def _call(self, a: Attempt, reach: Reach) -> str:
        target, body = a.target, a.body
        fn = reach.functions.get(target.destination)
        if fn is None:
            raise DeliveryError("FunctionNotFound",
                                f"no function {target.destination!r} is registered on this"
                                " node's app", retryable=True)
        event = event_for(body, a.ctx, a.attempt)
        try:
            if inspect.iscoroutinefunction(fn):
                result = await fn(event)
            else:  # the user's code, which may take its time: not on the store's pool
                result = await asyncio.to_thread(fn, event)
        except Exception as exc:  # noqa: BLE001 - the user's code failed: a retry
            raise DeliveryError("FunctionError", f"{type(exc).__name__}: {exc}") from exc
        then = target.options.get("then")
        if isinstance(result, Suppress):
            return "suppressed"
        if isinstance(result, Route):
            routed = result.target
            if isinstance(routed, str):
                routed = TargetSpec.queue(routed)
            new_body = body if result.input is None else as_input(result.input)
            return await reach.deliver(a._replace(target=routed, body=new_body,
                                                  depth=a.depth + 1))
        if then is None:
            return "delivered"
        new_body = body if result is None else as_input(result)
        return await reach.deliver(a._replace(target=TargetSpec.from_json(then),
                                              body=new_body, depth=a.depth + 1))

    async def gave_up(self, attempt: Attempt, failure: DeliveryError, reach: Reach) -> None:
        return None
