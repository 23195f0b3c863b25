"""The Amazon SQS actions, each over `QueueService` through the store bridge.

An action takes the JSON-shaped request (query-protocol requests are converted first) and
returns the JSON-shaped result, None for the actions whose response is empty. Parameter
names, defaults and result members are those of the SQS API reference (2012-11-05).
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tidings.client import Tidings
from tidings.errors import ValidationError
from tidings.model.digests import md5_of_attributes
from tidings.model.messages import OutgoingMessage, ReceivedMessage, validate_batch_ids
from tidings.model.queues import MoveTask, QueueAttributes, QueueRecord
from tidings.queues.coalesce import Coalescer
from tidings.queues.receive_attempts import check_attempt_id
from tidings.runtime.bridge import Bridge
from tidings.server.aws.arns import Naming, name_from_arn, name_from_url
from tidings.server.aws.sqs_protocol import (
    SqsError,
    attribute_doc,
    optional_int,
    parse_message_attributes,
    required,
    required_int,
    string_list,
    string_map,
)


@dataclass(frozen=True)
class Call:
    """One request's context: the services, how URLs are named, and its ASGI scope (for
    the base URL, worked out only by the few actions that answer with a queue URL)."""

    t: Tidings
    bridge: Bridge
    coalescer: Coalescer
    naming: Naming
    scope: Mapping[str, Any]

    def url(self, name: str) -> str:
        return self.naming.queue_url(base_url(self.naming, self.scope), name)


def base_url(naming: Naming, scope: Mapping[str, Any]) -> str:
    """Where the request was sent: the public URL if one is set, else its Host header."""
    if naming.public_url:
        return naming.base_url("http", None)
    host = None
    for key, value in scope["headers"]:
        if key == b"host":
            host = value.decode("latin-1")
            break
    if host is None and scope.get("server"):
        server_host, port = scope["server"]
        host = f"{server_host}:{port}"
    return naming.base_url(str(scope.get("scheme", "http")), host)


Result = dict[str, Any] | None
Action = Callable[[Call, dict[str, Any]], Awaitable[Result]]

QUEUE_ATTRIBUTE_NAMES = frozenset({
    "All", "Policy", "VisibilityTimeout", "MaximumMessageSize", "MessageRetentionPeriod",
    "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "CreatedTimestamp",
    "LastModifiedTimestamp", "QueueArn", "ApproximateNumberOfMessagesDelayed", "DelaySeconds",
    "ReceiveMessageWaitTimeSeconds", "RedrivePolicy", "FifoQueue", "ContentBasedDeduplication",
    "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "DeduplicationScope",
    "FifoThroughputLimit", "RedriveAllowPolicy", "SqsManagedSseEnabled"})

def _entries(req: Mapping[str, Any]) -> list[dict[str, Any]]:
    entries = req.get("Entries") or []
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValidationError("Entries", "must be a list of entries")
    validate_batch_ids([e.get("Id") for e in entries])
    return entries


def _queue(req: Mapping[str, Any]) -> str:
    return name_from_url(required(req, "QueueUrl"))


# --- queues ---------------------------------------------------------------------------------


async def create_queue(c: Call, req: dict[str, Any]) -> Result:
    name = str(required(req, "QueueName"))
    changes = QueueAttributes.sqs_changes(string_map(req, "Attributes"))
    if name.endswith(".fifo") and not changes.get("fifo"):
        # SQS: without FifoQueue=true the queue is standard, and a standard queue's name
        # cannot hold a '.' (the Python API, CLI and native API infer FIFO from the name).
        raise ValidationError("QueueName", "Can only include alphanumeric characters, hyphens,"
                              " or underscores. 1 to 80 in length (a FIFO queue needs"
                              " FifoQueue=true)")
    tags = string_map(req, "tags") or string_map(req, "Tags")
    if tags:
        changes["tags"] = tags
    record = await c.bridge.run(c.t.queues.create_queue, name, **changes)
    return {"QueueUrl": c.url(record.name)}


async def get_queue_url(c: Call, req: dict[str, Any]) -> Result:
    record = await c.bridge.run(c.t.queues.get_queue, str(required(req, "QueueName")))
    return {"QueueUrl": c.url(record.name)}


async def list_queues(c: Call, req: dict[str, Any]) -> Result:
    limit = optional_int(req, "MaxResults")
    records, token = await c.bridge.run(
        c.t.queues.list_queues, str(req.get("QueueNamePrefix") or ""),
        limit=1000 if limit is None else limit, next_token=req.get("NextToken") or None)
    out: dict[str, Any] = {}
    if records:
        out["QueueUrls"] = [c.url(r.name) for r in records]
    if token and limit is not None:  # SQS pages only when the caller asked for MaxResults
        out["NextToken"] = token
    return out


async def delete_queue(c: Call, req: dict[str, Any]) -> Result:
    await c.bridge.run(c.t.queues.delete_queue, _queue(req))
    return None


async def get_queue_attributes(c: Call, req: dict[str, Any]) -> Result:
    name = _queue(req)
    names = string_list(req, "AttributeNames")
    for wanted in names:
        if wanted not in QUEUE_ATTRIBUTE_NAMES:
            raise SqsError("InvalidAttributeName", f"Unknown Attribute {wanted}.")
    info = await c.bridge.run(c.t.queues.describe, name)
    if not names:
        return {}
    record, counts = info.record, info.counts
    attrs = record.attributes.to_sqs(c.naming.queue_arn)
    attrs.update({
        "ApproximateNumberOfMessages": str(counts.visible),
        "ApproximateNumberOfMessagesNotVisible": str(counts.in_flight),
        "ApproximateNumberOfMessagesDelayed": str(counts.delayed),
        "CreatedTimestamp": str(record.created_at // 1000),  # SQS: epoch seconds
        "LastModifiedTimestamp": str(record.modified_at // 1000),
        "QueueArn": c.naming.queue_arn(record.name),
    })
    if "All" not in names:
        attrs = {k: v for k, v in attrs.items() if k in names}
    return {"Attributes": attrs} if attrs else {}


async def set_queue_attributes(c: Call, req: dict[str, Any]) -> Result:
    name = _queue(req)
    changes = QueueAttributes.sqs_changes(string_map(req, "Attributes"))
    if changes:
        await c.bridge.run(c.t.queues.update_queue, name, **changes)
    else:  # only attributes tidings accepts and ignores: the queue must still exist
        await c.bridge.run(c.t.queues.get_queue, name)
    return None


async def purge_queue(c: Call, req: dict[str, Any]) -> Result:
    await c.bridge.run(c.t.queues.purge_queue, _queue(req))
    return None


async def tag_queue(c: Call, req: dict[str, Any]) -> Result:
    await c.bridge.run(c.t.queues.tag_queue, _queue(req), string_map(req, "Tags"))
    return None


async def untag_queue(c: Call, req: dict[str, Any]) -> Result:
    await c.bridge.run(c.t.queues.untag_queue, _queue(req), string_list(req, "TagKeys"))
    return None


async def list_queue_tags(c: Call, req: dict[str, Any]) -> Result:
    record: QueueRecord = await c.bridge.run(c.t.queues.get_queue, _queue(req))
    return {"Tags": dict(record.attributes.tags)} if record.attributes.tags else {}


async def list_dead_letter_source_queues(c: Call, req: dict[str, Any]) -> Result:
    limit = optional_int(req, "MaxResults")
    token = str(req.get("NextToken") or "")
    records = await c.bridge.run(c.t.queues.dead_letter_sources, _queue(req))
    names = sorted(r.name for r in records)
    if token:
        try:
            after = base64.urlsafe_b64decode(token.encode()).decode()
        except (ValueError, UnicodeDecodeError):
            raise ValidationError("NextToken", "is not a token this API returned") from None
        names = [n for n in names if n > after]
    out: dict[str, Any] = {"queueUrls": [c.url(n) for n in names[:limit]]}
    if limit is not None and len(names) > limit:
        out["NextToken"] = base64.urlsafe_b64encode(names[limit - 1].encode()).decode()
    return out


async def unsupported(c: Call, req: dict[str, Any]) -> Result:
    raise SqsError("UnsupportedOperation",
                   "tidings does not implement queue access policies (AddPermission, "
                   "RemovePermission); restrict access with SigV4 keys instead.")


# --- messages -------------------------------------------------------------------------------


def _outgoing(req: Mapping[str, Any], entry_id: str | None = None) -> OutgoingMessage:
    body = required(req, "MessageBody")
    if not isinstance(body, str):
        raise ValidationError("MessageBody", "must be a string")
    group, dedup = req.get("MessageGroupId"), req.get("MessageDeduplicationId")
    return OutgoingMessage(
        body, optional_int(req, "DelaySeconds"),
        parse_message_attributes(req.get("MessageAttributes"), "MessageAttributes"),
        None if group is None else str(group), None if dedup is None else str(dedup), entry_id)


def _system_md5(req: Mapping[str, Any]) -> str | None:
    """MD5OfMessageSystemAttributes of AWSTraceHeader, the one system attribute a sender sets.
    tidings accepts it for compatibility; it is not stored."""
    attrs = parse_message_attributes(req.get("MessageSystemAttributes"),
                                     "MessageSystemAttributes")
    for name in attrs:
        if name != "AWSTraceHeader":
            raise ValidationError(f"MessageSystemAttributes.{name}",
                                  "only AWSTraceHeader can be set")
    return md5_of_attributes(attrs)


async def send_message(c: Call, req: dict[str, Any]) -> Result:
    msg = _outgoing(req)
    system_md5 = _system_md5(req)
    r = await c.coalescer.send(_queue(req), msg)
    out = {"MessageId": r.message_id, "MD5OfMessageBody": r.md5_body}
    if r.md5_attributes:
        out["MD5OfMessageAttributes"] = r.md5_attributes
    if system_md5:
        out["MD5OfMessageSystemAttributes"] = system_md5
    if r.sequence_number:
        out["SequenceNumber"] = r.sequence_number
    return out


def _failure(entry_id: str, code: str, message: str, sender: bool = True) -> dict[str, Any]:
    return {"Id": entry_id, "SenderFault": sender, "Code": code, "Message": message}


async def send_message_batch(c: Call, req: dict[str, Any]) -> Result:
    name = _queue(req)
    messages, failed, system_md5 = [], [], {}
    for entry in _entries(req):
        entry_id = str(entry["Id"])
        try:
            messages.append(_outgoing(entry, entry_id))
            system_md5[entry_id] = _system_md5(entry)
        except (ValidationError, SqsError) as exc:
            code = exc.shape if isinstance(exc, SqsError) else "InvalidParameterValue"
            failed.append(_failure(entry_id, code, exc.message))
    if not messages:  # every entry failed here; a missing queue must still be an error
        await c.bridge.run(c.t.queues.get_queue, name)
        return {"Successful": [], "Failed": failed}
    results, failures = await c.coalescer.send_batch(name, messages)
    successful = []
    for r in results:
        doc = {"Id": r.entry_id, "MessageId": r.message_id, "MD5OfMessageBody": r.md5_body}
        if r.md5_attributes:
            doc["MD5OfMessageAttributes"] = r.md5_attributes
        if system_md5.get(r.entry_id or ""):
            doc["MD5OfMessageSystemAttributes"] = system_md5[r.entry_id or ""]
        if r.sequence_number:
            doc["SequenceNumber"] = r.sequence_number
        successful.append(doc)
    failed += [_failure(f.entry_id, f.code, f.message, f.sender_fault) for f in failures]
    return {"Successful": successful, "Failed": failed}


def _wanted(name: str, patterns: list[str]) -> bool:
    """MessageAttributeNames: `All` or `.*` for every attribute, `prefix.*` for a family,
    otherwise exact names."""
    for p in patterns:
        if p in ("All", ".*") or p == name or (p.endswith(".*") and name.startswith(p[:-1])):
            return True
    return False


def _message_doc(c: Call, m: ReceivedMessage, system: set[str],
                 patterns: list[str]) -> dict[str, Any]:
    doc: dict[str, Any] = {"MessageId": m.message_id, "ReceiptHandle": m.receipt_handle,
                           "MD5OfBody": m.md5_body, "Body": m.body}
    if system:
        attrs = m.system_attributes()
        if "All" not in system:
            attrs = {k: v for k, v in attrs.items() if k in system}
        if attrs:
            doc["Attributes"] = attrs
    if patterns and m.attributes:
        chosen = {k: v for k, v in m.attributes.items() if _wanted(k, patterns)}
        if chosen:
            # SQS digests the attributes it returns, not all the message carries.
            doc["MD5OfMessageAttributes"] = (m.md5_attributes if len(chosen) == len(m.attributes)
                                             else md5_of_attributes(chosen))
            doc["MessageAttributes"] = {k: attribute_doc(v) for k, v in chosen.items()}
    return doc


async def receive_message(c: Call, req: dict[str, Any]) -> Result:
    name = _queue(req)
    system = set(string_list(req, "AttributeNames"))
    system.update(string_list(req, "MessageSystemAttributeNames"))
    patterns = string_list(req, "MessageAttributeNames")
    count = optional_int(req, "MaxNumberOfMessages")
    visibility_s = optional_int(req, "VisibilityTimeout")
    attempt = req.get("ReceiveRequestAttemptId")
    got = None
    if attempt is not None:
        attempt = check_attempt_id(attempt)
        got = await c.bridge.run(c.t.queues.replay_receive, name, attempt, visibility_s)
    if got is None:
        got = await c.coalescer.receive(
            name, 1 if count is None else count, wait_s=optional_int(req, "WaitTimeSeconds"),
            visibility_s=visibility_s)
        if attempt is not None:
            await c.bridge.run(c.t.queues.remember_receive, name, attempt, got)
    if not got:
        return {}
    return {"Messages": [_message_doc(c, m, system, patterns) for m in got]}


async def delete_message(c: Call, req: dict[str, Any]) -> Result:
    await c.coalescer.delete(_queue(req), str(required(req, "ReceiptHandle")))
    return None


async def delete_message_batch(c: Call, req: dict[str, Any]) -> Result:
    name = _queue(req)
    pairs = [(str(e["Id"]), str(e.get("ReceiptHandle") or "")) for e in _entries(req)]
    ok, failures = await c.bridge.run(c.t.queues.delete_batch, name, pairs)
    return {"Successful": [{"Id": i} for i in ok],
            "Failed": [_failure(f.entry_id, f.code, f.message, f.sender_fault) for f in failures]}


async def change_message_visibility(c: Call, req: dict[str, Any]) -> Result:
    await c.bridge.run(c.t.queues.change_visibility, _queue(req),
                       str(required(req, "ReceiptHandle")), required_int(req, "VisibilityTimeout"))
    return None


async def change_message_visibility_batch(c: Call, req: dict[str, Any]) -> Result:
    name = _queue(req)
    triples = [(str(e["Id"]), str(e.get("ReceiptHandle") or ""),
                required_int(e, "VisibilityTimeout")) for e in _entries(req)]
    ok, failures = await c.bridge.run(c.t.queues.change_visibility_batch, name, triples)
    return {"Successful": [{"Id": i} for i in ok],
            "Failed": [_failure(f.entry_id, f.code, f.message, f.sender_fault) for f in failures]}


# --- message move tasks ---------------------------------------------------------------------


async def start_message_move_task(c: Call, req: dict[str, Any]) -> Result:
    source = name_from_arn(required(req, "SourceArn"), "SourceArn")
    dest = req.get("DestinationArn")
    handle = await c.bridge.run(
        c.t.queues.start_move_task, source,
        name_from_arn(dest, "DestinationArn") if dest else None,
        optional_int(req, "MaxNumberOfMessagesPerSecond"))
    return {"TaskHandle": handle}


def _task_doc(c: Call, task: MoveTask, source: str, names: dict[int, str]) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "Status": task.status.value, "SourceArn": c.naming.queue_arn(source),
        "ApproximateNumberOfMessagesMoved": task.moved,
        "ApproximateNumberOfMessagesToMove": task.to_move, "StartedTimestamp": task.started_at}
    if task.status.value == "RUNNING":  # SQS gives the handle only while it can be cancelled
        doc["TaskHandle"] = task.handle
    if task.destination_queue_id is not None and task.destination_queue_id in names:
        doc["DestinationArn"] = c.naming.queue_arn(names[task.destination_queue_id])
    if task.max_per_second is not None:
        doc["MaxNumberOfMessagesPerSecond"] = task.max_per_second
    if task.failure_reason:
        doc["FailureReason"] = task.failure_reason
    return doc


async def list_message_move_tasks(c: Call, req: dict[str, Any]) -> Result:
    source = name_from_arn(required(req, "SourceArn"), "SourceArn")
    limit = optional_int(req, "MaxResults")
    tasks = await c.bridge.run(c.t.queues.list_move_tasks, source, 1 if limit is None else limit)
    names = await c.bridge.run(c.t.queues.queue_names, tasks) if tasks else {}
    return {"Results": [_task_doc(c, task, source, names) for task in tasks]}


async def cancel_message_move_task(c: Call, req: dict[str, Any]) -> Result:
    task = await c.bridge.run(c.t.queues.cancel_move_task, str(required(req, "TaskHandle")))
    return {"ApproximateNumberOfMessagesMoved": task.moved}


ACTIONS: dict[str, Action] = {
    "CreateQueue": create_queue, "GetQueueUrl": get_queue_url, "ListQueues": list_queues,
    "DeleteQueue": delete_queue, "GetQueueAttributes": get_queue_attributes,
    "SetQueueAttributes": set_queue_attributes, "PurgeQueue": purge_queue,
    "TagQueue": tag_queue, "UntagQueue": untag_queue, "ListQueueTags": list_queue_tags,
    "ListDeadLetterSourceQueues": list_dead_letter_source_queues,
    "AddPermission": unsupported, "RemovePermission": unsupported,
    "SendMessage": send_message, "SendMessageBatch": send_message_batch,
    "ReceiveMessage": receive_message, "DeleteMessage": delete_message,
    "DeleteMessageBatch": delete_message_batch,
    "ChangeMessageVisibility": change_message_visibility,
    "ChangeMessageVisibilityBatch": change_message_visibility_batch,
    "StartMessageMoveTask": start_message_move_task,
    "ListMessageMoveTasks": list_message_move_tasks,
    "CancelMessageMoveTask": cancel_message_move_task,
}
