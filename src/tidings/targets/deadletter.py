"""The dead-letter event a schedule's DLQ receives when its target could not be reached.

The body is the input the target would have received; the reason travels as message
attributes, named as EventBridge Scheduler names them, so a consumer of the DLQ can tell
why and how often delivery was tried.
"""

from __future__ import annotations

from tidings.model.digests import MessageAttributeValue
from tidings.model.firings import FiringContext, scheduled_time_text
from tidings.model.schedules import Target


def dead_letter_attributes(ctx: FiringContext, target: Target, code: str, message: str, *,
                           attempts: int, exhausted: str) -> dict[str, MessageAttributeValue]:
    def s(value: str) -> MessageAttributeValue:
        return MessageAttributeValue("String", string_value=value[:1024] or "-")

    return {
        "ERROR_CODE": s(code),
        "ERROR_MESSAGE": s(message),
        "EXHAUSTED_RETRY_CONDITION": s(exhausted),
        "RETRY_ATTEMPTS": MessageAttributeValue("Number", string_value=str(max(attempts - 1, 0))),
        "EXECUTION_ID": s(ctx.execution_id),
        "SCHEDULE_ARN": s(ctx.schedule_arn),
        "SCHEDULED_TIME": s(scheduled_time_text(ctx.scheduled_time)),
        "TARGET_ARN": s(target.arn or target.destination or target.kind.value),
    }
