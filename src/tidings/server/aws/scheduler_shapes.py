"""EventBridge Scheduler's REST-JSON shapes, to and from tidings schedules.

Field names, ranges and defaults follow the Scheduler API reference (botocore's
`scheduler/2021-06-30` model is the authority the tests check against). Timestamps are
epoch seconds (JSON numbers, fractional allowed) on the wire and epoch milliseconds inside.

Targets tidings can deliver to, by ARN:

* `arn:aws:sqs:{region}:{account}:{queue}`: the queue (`SqsParameters.MessageGroupId` for
  FIFO); the region and account are not checked, the queue name alone resolves it, as
  for queue URLs.
* `arn:aws:scheduler:::aws-sdk:sqs:sendMessage` (universal target): `Input` holds the
  SendMessage parameters; the queue is the last path segment of `QueueUrl` and the message
  body is `MessageBody`, in which context attributes are substituted as in any Input.
* `arn:aws:scheduler:::aws-sdk:sesv2:sendEmail`: an email target whose Input is the
  SendEmail request.
* `arn:aws:lambda:{region}:{account}:function:{name}[:qualifier]`: the function target
  `name` (registered with the node's App), or an HTTP webhook when `TIDINGS_LAMBDA_WEBHOOKS`
  (a JSON object {function name: URL}) names it: existing Lambda-targeting code then
  reaches a self-hosted HTTP endpoint unchanged.

What a request gave is what GetSchedule returns: the original ARN and Input are kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidings.errors import ValidationError
from tidings.model.schedules import (
    DEFAULT_GROUP,
    ActionAfterCompletion,
    RetryPolicy,
    Schedule,
    ScheduleGroup,
    ScheduleSpec,
    ScheduleState,
    Target,
)
from tidings.server.aws.arns import Naming, name_from_arn, name_from_url
from tidings.targets.registry import target_of
from tidings.triggers import has_fraction_of_second

UNIVERSAL_SQS_SEND = "arn:aws:scheduler:::aws-sdk:sqs:sendMessage"
UNIVERSAL_SES_SEND = "arn:aws:scheduler:::aws-sdk:sesv2:sendEmail"

#: Where the original universal-target Input is kept, since `Target.input` holds the body.
_AWS_INPUT_OPTION = "aws_input"
_SEND_MESSAGE_KEYS = ("QueueUrl", "MessageBody", "MessageGroupId")
_ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
_KMS_ARN_RE = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9\-]+:\d{12}:(key|alias)/[0-9a-zA-Z-_]*$")
_LAMBDA_ARN_RE = re.compile(
    r"^arn:aws[a-z-]*:lambda:[a-z0-9\-]*:\d*:function:([a-zA-Z0-9\-_]+)(:[a-zA-Z0-9\-_$]+)?$")
#: Target parameter blocks of AWS services tidings does not deliver to.
_FOREIGN_PARAMETERS = ("EcsParameters", "EventBridgeParameters",
                       "EventBridgePutEventsV2Parameters", "EventBridgePutRawEventsParameters",
                       "KinesisParameters", "SageMakerPipelineParameters")


# typed reads of a JSON document -------------------------------------------------------------

def _obj(doc: Mapping[str, Any], key: str, field: str, *, required: bool = False,
         ) -> dict[str, Any] | None:
    value = _present(doc, key, field, required)
    if value is not None and not isinstance(value, dict):
        raise ValidationError(field, "must be a JSON object")
    return value


def _str(doc: Mapping[str, Any], key: str, field: str, *, required: bool = False,
         ) -> str | None:
    value = _present(doc, key, field, required)
    if value is not None and not isinstance(value, str):
        raise ValidationError(field, "must be a string")
    return value


def _present(doc: Mapping[str, Any], key: str, field: str, required: bool) -> Any:
    value = doc.get(key)
    if value is None and required:
        raise ValidationError(field, "is required")
    return value


def _int(doc: Mapping[str, Any], key: str, field: str) -> int | None:
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(field, "must be an integer")
    return value


def _epoch_ms(doc: Mapping[str, Any], key: str) -> int | None:
    """A REST-JSON timestamp: epoch seconds, possibly fractional."""
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(key, "must be a timestamp in epoch seconds")
    if not 0 <= value < 253402300800:  # up to 9999-12-31T23:59:59Z
        raise ValidationError(key, "must be a date from 1970 to 9999")
    return round(value * 1000)


def _seconds(ms: int) -> float | int:
    return ms // 1000 if ms % 1000 == 0 else ms / 1000


def _enum(value: str | None, field: str, allowed: tuple[str, ...], default: str) -> str:
    if value is None:
        return default
    if value not in allowed:
        raise ValidationError(field, f"must be one of {', '.join(allowed)}")
    return value


def parse_body(body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {}
    try:
        doc: Any = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ValidationError("body", "must be a valid JSON document") from None
    if not isinstance(doc, dict):
        raise ValidationError("body", "must be a JSON object")
    return doc


# requests -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Shapes:
    """Translation for one node: its naming (region, account) and Lambda webhook map."""

    naming: Naming
    webhooks: Mapping[str, str]

    def spec(self, name: str, doc: Mapping[str, Any]) -> ScheduleSpec:
        """A CreateSchedule / UpdateSchedule body (Name comes from the path)."""
        window = _obj(doc, "FlexibleTimeWindow", "FlexibleTimeWindow", required=True)
        assert window is not None
        mode = _enum(_str(window, "Mode", "FlexibleTimeWindow.Mode", required=True),
                     "FlexibleTimeWindow.Mode", ("OFF", "FLEXIBLE"), "OFF")
        minutes = _int(window, "MaximumWindowInMinutes",
                       "FlexibleTimeWindow.MaximumWindowInMinutes")
        if mode == "FLEXIBLE" and minutes is None:
            raise ValidationError("FlexibleTimeWindow.MaximumWindowInMinutes",
                                  "is required when Mode is FLEXIBLE")
        if mode == "OFF" and minutes is not None:
            raise ValidationError("FlexibleTimeWindow.MaximumWindowInMinutes",
                                  "must be omitted when Mode is OFF")
        kms = _str(doc, "KmsKeyArn", "KmsKeyArn")
        if kms is not None and not _KMS_ARN_RE.match(kms):
            raise ValidationError("KmsKeyArn", "must be a KMS key or alias ARN")
        target = _obj(doc, "Target", "Target", required=True)
        assert target is not None
        expression = _str(doc, "ScheduleExpression", "ScheduleExpression", required=True) or ""
        if has_fraction_of_second(expression):
            # tidings' own faces take milliseconds; the AWS API keeps AWS's syntax
            raise ValidationError("ScheduleExpression",
                                  "a one-time schedule is at(yyyy-mm-ddThh:mm:ss)")
        return ScheduleSpec(
            name=name,
            group=_str(doc, "GroupName", "GroupName") or DEFAULT_GROUP,
            expression=expression,
            timezone=_str(doc, "ScheduleExpressionTimezone", "ScheduleExpressionTimezone")
            or "UTC",
            start_ms=_epoch_ms(doc, "StartDate"),
            end_ms=_epoch_ms(doc, "EndDate"),
            state=ScheduleState(_enum(_str(doc, "State", "State"), "State",
                                      ("ENABLED", "DISABLED"), "ENABLED")),
            flexible_window_minutes=minutes,
            action_after_completion=ActionAfterCompletion(_enum(
                _str(doc, "ActionAfterCompletion", "ActionAfterCompletion"),
                "ActionAfterCompletion", ("NONE", "DELETE"), "NONE")),
            description=_str(doc, "Description", "Description"),
            client_token=_str(doc, "ClientToken", "ClientToken"),
            kms_key_arn=kms,
            target=self.target(target),
        )

    def target(self, doc: Mapping[str, Any]) -> Target:
        arn = _str(doc, "Arn", "Target.Arn", required=True) or ""
        role = _str(doc, "RoleArn", "Target.RoleArn")
        if role is not None and not _ROLE_ARN_RE.match(role):
            raise ValidationError("Target.RoleArn", "must be an IAM role ARN "
                                  "(arn:aws:iam::123456789012:role/name)")
        text = _str(doc, "Input", "Target.Input")
        for key in _FOREIGN_PARAMETERS:
            if doc.get(key) is not None:
                raise ValidationError(f"Target.{key}", "is not supported: tidings delivers to "
                                      "SQS queues, Lambda functions and email")
        retry = _obj(doc, "RetryPolicy", "Target.RetryPolicy") or {}
        attempts = _int(retry, "MaximumRetryAttempts", "Target.RetryPolicy.MaximumRetryAttempts")
        age = _int(retry, "MaximumEventAgeInSeconds",
                   "Target.RetryPolicy.MaximumEventAgeInSeconds")
        try:
            policy = RetryPolicy.given(attempts, age)
        except ValidationError as exc:  # named from the request's root, as other fields are
            raise ValidationError(f"Target.{exc.field}", exc.rule) from None
        dlq_doc = _obj(doc, "DeadLetterConfig", "Target.DeadLetterConfig") or {}
        dlq_arn = _str(dlq_doc, "Arn", "Target.DeadLetterConfig.Arn")
        dlq = None if dlq_arn is None else name_from_arn(dlq_arn, "Target.DeadLetterConfig.Arn")
        sqs_doc = _obj(doc, "SqsParameters", "Target.SqsParameters")
        group_id = None if sqs_doc is None else _str(
            sqs_doc, "MessageGroupId", "Target.SqsParameters.MessageGroupId")
        common: dict[str, Any] = {"retry_policy": policy, "dead_letter_queue": dlq,
                                  "role_arn": role, "arn": arn}
        if arn.startswith("arn:") and arn.split(":")[2:3] == ["sqs"]:
            return Target.queue(name_from_arn(arn, "Target.Arn"), text,
                                message_group_id=group_id, **common)
        if sqs_doc is not None:
            raise ValidationError("Target.SqsParameters", "applies to SQS queue targets only")
        if arn == UNIVERSAL_SQS_SEND:
            return self._send_message(text, common)
        if arn == UNIVERSAL_SES_SEND:
            if text is None:
                raise ValidationError("Target.Input", "is required: the SendEmail request")
            return Target.email(text, **common)
        match = _LAMBDA_ARN_RE.match(arn)
        if match:
            function = match.group(1)
            url = self.webhooks.get(function)
            if url is not None:
                return Target.webhook(url, text, **common)
            return Target.function(function, text, **common)
        raise ValidationError("Target.Arn", f"{arn!r} is not a target tidings delivers to: an "
                              "SQS queue ARN, a Lambda function ARN, or the universal targets "
                              f"{UNIVERSAL_SQS_SEND} and {UNIVERSAL_SES_SEND}")

    @staticmethod
    def _send_message(text: str | None, common: dict[str, Any]) -> Target:
        if text is None:
            raise ValidationError("Target.Input", "is required: the SendMessage parameters")
        try:
            params: Any = json.loads(text)
        except json.JSONDecodeError:
            raise ValidationError("Target.Input", "must be a JSON object of SendMessage "
                                  "parameters (QueueUrl, MessageBody)") from None
        if not isinstance(params, dict):
            raise ValidationError("Target.Input", "must be a JSON object of SendMessage "
                                  "parameters (QueueUrl, MessageBody)")
        for key in params:
            if key not in _SEND_MESSAGE_KEYS:
                raise ValidationError(f"Target.Input.{key}", "is not supported; the "
                                      "SendMessage parameters taken are "
                                      + ", ".join(_SEND_MESSAGE_KEYS))
        queue = name_from_url(params.get("QueueUrl"), "Target.Input.QueueUrl")
        body = _str(params, "MessageBody", "Target.Input.MessageBody", required=True)
        if not body:
            raise ValidationError("Target.Input.MessageBody", "must not be empty")
        group_id = _str(params, "MessageGroupId", "Target.Input.MessageGroupId")
        return Target.queue(queue, body, message_group_id=group_id,
                            options={_AWS_INPUT_OPTION: text}, **common)

    # responses --------------------------------------------------------------------------

    def target_arn(self, target: Target) -> str:
        """The ARN a request gave, or one naming the target (schedules made natively)."""
        if target.arn:
            return target.arn
        return target_of(target).aws_arn(target, self.naming.region, self.naming.account_id)

    def target_out(self, target: Target) -> dict[str, Any]:
        out: dict[str, Any] = {"Arn": self.target_arn(target)}
        if target.role_arn:
            out["RoleArn"] = target.role_arn
        original = target.options.get(_AWS_INPUT_OPTION)
        text = original if isinstance(original, str) else target.input
        if text is not None:
            out["Input"] = text
        out["RetryPolicy"] = {
            "MaximumEventAgeInSeconds": target.retry_policy.maximum_event_age_s,
            "MaximumRetryAttempts": target.retry_policy.maximum_retry_attempts}
        if target.dead_letter_queue:
            out["DeadLetterConfig"] = {"Arn": self.naming.queue_arn(target.dead_letter_queue)}
        if (target_of(target).writes_queue and target.message_group_id
                and _AWS_INPUT_OPTION not in target.options):
            out["SqsParameters"] = {"MessageGroupId": target.message_group_id}
        return out

    def schedule_out(self, s: Schedule, arn: str) -> dict[str, Any]:
        spec = s.spec
        out: dict[str, Any] = {
            "Arn": arn, "GroupName": spec.group, "Name": spec.name,
            "ScheduleExpression": spec.expression,
            "ScheduleExpressionTimezone": spec.timezone,
            "State": str(spec.state),
            "CreationDate": _seconds(s.created_at),
            "LastModificationDate": _seconds(s.modified_at),
            "Target": self.target_out(spec.target),
            "FlexibleTimeWindow": {"Mode": "OFF"} if not spec.flexible_window_minutes else
            {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": spec.flexible_window_minutes},
            "ActionAfterCompletion": str(spec.action_after_completion),
        }
        if spec.start_ms is not None:
            out["StartDate"] = _seconds(spec.start_ms)
        if spec.end_ms is not None:
            out["EndDate"] = _seconds(spec.end_ms)
        if spec.description is not None:
            out["Description"] = spec.description
        if spec.kms_key_arn is not None:
            out["KmsKeyArn"] = spec.kms_key_arn
        return out

    def summary_out(self, s: Schedule, arn: str) -> dict[str, Any]:
        return {"Arn": arn, "Name": s.name, "GroupName": s.group, "State": str(s.spec.state),
                "CreationDate": _seconds(s.created_at),
                "LastModificationDate": _seconds(s.modified_at),
                "Target": {"Arn": self.target_arn(s.spec.target)}}


def group_out(group: ScheduleGroup, arn: str) -> dict[str, Any]:
    # Deletion is immediate here, so a group is never seen DELETING.
    return {"Arn": arn, "Name": group.name, "State": "ACTIVE",
            "CreationDate": _seconds(group.created_at),
            "LastModificationDate": _seconds(group.modified_at)}


def tags_in(doc: Mapping[str, Any]) -> dict[str, str]:
    """`Tags: [{"Key", "Value"}]` as a mapping; a repeated key keeps its last value."""
    raw = doc.get("Tags")
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ValidationError("Tags", "must be a list of {Key, Value} objects")
    tags: dict[str, str] = {}
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise ValidationError(f"Tags.{index}", "must be a {Key, Value} object")
        key = _str(item, "Key", f"Tags.{index}.Key", required=True) or ""
        tags[key] = _str(item, "Value", f"Tags.{index}.Value", required=True) or ""
    return tags


def tags_out(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def group_from_arn(arn: str) -> str:
    """The group named by a schedule-group ARN: the only resource Scheduler tags."""
    prefix, sep, name = arn.partition(":schedule-group/")
    parts = prefix.split(":")
    if (not sep or len(parts) != 5 or parts[0] != "arn" or parts[2] != "scheduler"
            or not name or "/" in name):
        raise ValidationError("ResourceArn", f"{arn!r} is not a schedule group ARN "
                              "(arn:aws:scheduler:{region}:{account}:schedule-group/{name})")
    return name
