"""The queue target: a firing writes its input as a message into a tidings queue.

The usual firing never reaches `deliver`: the dispatcher writes the message in the firing's
own transaction (`writes_queue`). A delivery job carries a queue target only when that
could not be done then (the queue did not exist yet: EventBridge Scheduler checks a target
when it invokes it, so the retry policy gives the queue time to appear), or when a
function routed its firing to a queue.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from typing import ClassVar

from tidings.errors import QueueNotFound, TidingsError, ValidationError
from tidings.model.queues import DELIVERY_QUEUE, INTERNAL_QUEUES
from tidings.model.schedules import Target as TargetSpec
from tidings.model.schedules import TargetKind
from tidings.targets.base import (
    Attempt,
    DeliveryError,
    LimitPlace,
    Outcomes,
    Reach,
    TargetChecks,
    one_by_one,
)


class QueueTarget:
    kind: ClassVar[TargetKind] = TargetKind.QUEUE
    writes_queue: ClassVar[bool] = True
    delivery_queue: ClassVar[str] = DELIVERY_QUEUE
    checks_input: ClassVar[bool] = False
    input_limits: ClassVar[tuple[str, ...]] = ()
    logs_deliveries: ClassVar[bool] = False
    native_fields: ClassVar[bool] = True

    def validate(self, target: TargetSpec, checks: TargetChecks) -> bool:
        if target.destination in INTERNAL_QUEUES:
            raise ValidationError("Target.Arn", f"queue {target.destination!r} is tidings'"
                                  " own and takes no schedule's messages")
        try:
            queue = checks.queue_lookup(target.destination)
        except QueueNotFound:
            if not checks.must_exist:
                return False  # AWS: checked when invoked (the delivery retries, then DLQ)
            raise ValidationError("Target.Arn",
                                  f"queue {target.destination!r} does not exist") from None
        if queue.attributes.fifo and not target.message_group_id:
            raise ValidationError("Target.SqsParameters.MessageGroupId",
                                  "is required for a FIFO queue target")
        return True

    def limit_keys(self, target: TargetSpec, body: str | None, place: LimitPlace,
                   wanted: Container[str]) -> dict[str, str]:
        return {"queue": target.destination} if "queue" in wanted else {}

    def aws_arn(self, target: TargetSpec, region: str, account: str) -> str:
        return f"arn:aws:sqs:{region}:{account}:{target.destination}"

    async def deliver(self, batch: Sequence[Attempt], reach: Reach) -> Outcomes:
        async def send(a: Attempt) -> str:
            target = a.target
            try:
                await reach.bridge.run(reach.queues.send, target.destination, a.body,
                                       group_id=target.message_group_id,
                                       deduplication_id=a.ctx.execution_id
                                       if target.destination.endswith(".fifo") else None)
            except QueueNotFound as exc:
                # Retried: the queue may be created before the retry policy runs out.
                raise DeliveryError("QueueDoesNotExist", exc.message, retryable=True) from None
            except TidingsError as exc:
                raise DeliveryError(type(exc).__name__, exc.message, retryable=False) from None
            return "delivered"

        return await one_by_one(batch, send)

    async def gave_up(self, attempt: Attempt, failure: DeliveryError, reach: Reach) -> None:
        return None
