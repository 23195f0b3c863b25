"""Which queue and schedule-group names an AWS call acts on, for keys limited to name
prefixes (`auth.KeyGrant`), and which calls go into the audit log.

A call is allowed only when every name it acts on is within the key's prefixes: the queue
it addresses, a dead-letter queue its RedrivePolicy points to, a move task's source and
destination, a schedule's group and the queue it targets. Listings are filtered to the
names the key may see. Calls whose resource cannot be told from the request
(CancelMessageMoveTask by handle) are refused to a limited key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tidings.model.schedules import DEFAULT_GROUP

#: SQS actions written to the audit log (destructive or administrative).
SQS_AUDITED = frozenset({
    "CreateQueue", "DeleteQueue", "PurgeQueue", "SetQueueAttributes", "TagQueue",
    "UntagQueue", "StartMessageMoveTask", "CancelMessageMoveTask", "AddPermission",
    "RemovePermission"})

#: SQS actions a name-limited key may not call (their resource is not in the request).
SQS_UNNAMED = frozenset({"CancelMessageMoveTask"})

#: SES v2 writes that are everyday use, not administration: not audited.
SES_NOT_AUDITED = frozenset({"send_email", "send_bulk_email", "test_render",
                             "list_email_identities", "list_contacts"})


def name_of_url(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def name_of_arn(arn: str) -> str:
    return arn.rsplit(":", 1)[-1]


def sqs_names(req: Mapping[str, Any]) -> list[str]:
    names = []
    if isinstance(req.get("QueueName"), str):
        names.append(req["QueueName"])
    if isinstance(req.get("QueueUrl"), str):
        names.append(name_of_url(req["QueueUrl"]))
    for key in ("SourceArn", "DestinationArn"):
        if isinstance(req.get(key), str):
            names.append(name_of_arn(req[key]))
    attributes = req.get("Attributes")
    if isinstance(attributes, Mapping) and isinstance(attributes.get("RedrivePolicy"), str):
        try:
            policy = json.loads(attributes["RedrivePolicy"])
        except ValueError:
            policy = None  # the action itself says what is wrong with it
        if isinstance(policy, dict) and isinstance(policy.get("deadLetterTargetArn"), str):
            names.append(name_of_arn(policy["deadLetterTargetArn"]))
    return names


def filter_sqs_listing(result: Any, allowed: Any) -> Any:
    """ListQueues / ListDeadLetterSourceQueues answers without the names a key may not
    see (`allowed(name) -> bool`)."""
    if isinstance(result, dict):
        for key in ("QueueUrls", "queueUrls"):
            if isinstance(result.get(key), list):
                result[key] = [u for u in result[key] if allowed(name_of_url(u))]
    return result


def scheduler_names(path_params: Mapping[str, str], query: Mapping[str, str],
                    body: Mapping[str, Any], path: str, op: str) -> list[str]:
    """The groups (and target queues) a Scheduler call acts on."""
    if path.startswith("/schedule-groups/"):
        return [path_params["Name"]]
    if path.startswith("/tags/"):
        arn = path_params["ResourceArn"]
        return [arn.partition(":schedule-group/")[2] or arn]
    if op in ("list_schedules",):
        group = query.get("ScheduleGroup")
        return [group] if group else []
    if op in ("list_groups",):
        return []
    group = body.get("GroupName") if op in ("create_schedule", "update_schedule") else \
        query.get("groupName")
    names = [group if isinstance(group, str) and group else DEFAULT_GROUP]
    target = body.get("Target")
    if isinstance(target, Mapping) and isinstance(target.get("Arn"), str):
        arn = target["Arn"]
        if arn.startswith("arn:") and ":sqs:" in arn:
            names.append(name_of_arn(arn))
        dlq = target.get("DeadLetterConfig")
        if isinstance(dlq, Mapping) and isinstance(dlq.get("Arn"), str):
            names.append(name_of_arn(dlq["Arn"]))
    return names


def action_name(op: str) -> str:
    """`delete_schedule` → `DeleteSchedule`, as IAM names the action."""
    return "".join(part.capitalize() for part in op.split("_"))
