"""The two SQS wire protocols: JSON (awsJson1_0) and the older form-encoded query protocol.

Requests of both protocols become one JSON-shaped dict (the member names of the SQS API
reference), so an action is written once; responses go back as JSON or as XML in the
2012-11-05 namespace.

Errors: the JSON protocol answers `{"__type": "com.amazonaws.sqs#<Shape>", "message"}` plus
`x-amzn-query-error: <legacy code>;<Sender|Receiver>`. SQS moved from query to JSON in
2023 and kept its query-era codes in that header: botocore raises the exception named by
the shape (`client.exceptions.QueueDoesNotExist`) and reports the legacy code
(`AWS.SimpleQueueService.NonExistentQueue`) as `Error.Code`, which is what old code checks.
The query protocol answers an XML `ErrorResponse` carrying the legacy code. An action that
is no SQS operation is the service framework's `UnknownOperationException` in the JSON
protocol (it has no query-era code: `x-amzn-ErrorType` carries it) and `InvalidAction` in
the query protocol.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from xml.sax.saxutils import escape

from tidings.errors import BatchError, NotFoundError, TidingsError, ValidationError
from tidings.model.digests import MessageAttributeValue, decode_binary
from tidings.server.errors import error_info, retry_after

NAMESPACE = "http://queue.amazonaws.com/doc/2012-11-05/"
JSON_CONTENT_TYPE = b"application/x-amz-json-1.0"
XML_CONTENT_TYPE = b"text/xml"

#: Error shape → (query-protocol code, HTTP status), as SQS and the SDK models define them.
AWS_ERRORS: dict[str, tuple[str, int]] = {
    "QueueDoesNotExist": ("AWS.SimpleQueueService.NonExistentQueue", 400),
    "QueueNameExists": ("QueueAlreadyExists", 400),
    "QueueDeletedRecently": ("AWS.SimpleQueueService.QueueDeletedRecently", 400),
    "ReceiptHandleIsInvalid": ("ReceiptHandleIsInvalid", 400),
    "MessageNotInflight": ("AWS.SimpleQueueService.MessageNotInflight", 400),
    "PurgeQueueInProgress": ("AWS.SimpleQueueService.PurgeQueueInProgress", 403),
    "BatchEntryIdsNotDistinct": ("AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400),
    "BatchRequestTooLong": ("AWS.SimpleQueueService.BatchRequestTooLong", 400),
    "EmptyBatchRequest": ("AWS.SimpleQueueService.EmptyBatchRequest", 400),
    "InvalidBatchEntryId": ("AWS.SimpleQueueService.InvalidBatchEntryId", 400),
    "TooManyEntriesInBatchRequest": ("AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
                                     400),
    "UnsupportedOperation": ("AWS.SimpleQueueService.UnsupportedOperation", 400),
    "InvalidAttributeName": ("InvalidAttributeName", 400),
    "InvalidAttributeValue": ("InvalidAttributeValue", 400),
    "InvalidMessageContents": ("InvalidMessageContents", 400),
    "InvalidParameterValue": ("InvalidParameterValue", 400),
    "MissingParameter": ("MissingParameter", 400),
    "InvalidAction": ("InvalidAction", 400),
    "ResourceNotFoundException": ("ResourceNotFoundException", 404),
    "AccessDenied": ("AccessDenied", 403),  # a queue the caller may not touch
    "OverLimit": ("OverLimit", 403),
    # Query-era SQS answered it with 403 (botocore's legacy SQS rule retries exactly that);
    # tidings answers 429, which every retry strategy takes for throttling whatever the code.
    "RequestThrottled": ("RequestThrottled", 429),
    "ServiceUnavailable": ("ServiceUnavailable", 503),
    "InternalFailure": ("InternalFailure", 500),
}


class SqsError(Exception):
    """An error answered in SQS's shape. `shape` names it as the SDK models do."""

    def __init__(self, shape: str, message: str, *, query_code: str | None = None,
                 status: int | None = None, retry_after_s: int | None = None) -> None:
        known = AWS_ERRORS.get(shape, (shape, 400))
        self.shape = shape
        self.message = message
        self.query_code = query_code or known[0]
        self.status = status or known[1]
        self.retry_after_s = retry_after_s
        super().__init__(message)

    @property
    def fault(self) -> str:
        return "Receiver" if self.status >= 500 else "Sender"


class UnknownOperation(SqsError):
    """An action that is no SQS operation: `InvalidAction` in the query protocol, the
    framework's `UnknownOperationException` (HTTP 400) in the JSON protocol, as AWS's JSON
    services answer a target they do not know."""

    def __init__(self, message: str) -> None:
        super().__init__("UnknownOperationException", message, query_code="InvalidAction",
                         status=400)


_QUEUE_ATTRIBUTES = frozenset({
    "VisibilityTimeout", "DelaySeconds", "MessageRetentionPeriod", "MaximumMessageSize",
    "ReceiveMessageWaitTimeSeconds", "FifoQueue", "ContentBasedDeduplication", "RedrivePolicy",
    "RedriveAllowPolicy"})
_MOVE_TASK_ACTIONS = frozenset({"StartMessageMoveTask", "ListMessageMoveTasks",
                                "CancelMessageMoveTask"})


def _validation_shape(exc: ValidationError, action: str) -> str:
    """The SQS error for bad input. The batch rules are those of `validate_batch_ids`:
    SQS names each (empty, too many, repeated id, malformed id) with its own error."""
    field = exc.field
    if field == "Entries":
        return "EmptyBatchRequest" if "at least" in exc.rule else "TooManyEntriesInBatchRequest"
    if field == "Entries.Id":
        return "BatchEntryIdsNotDistinct" if "distinct" in exc.rule else "InvalidBatchEntryId"
    if action in ("CreateQueue", "SetQueueAttributes"):
        if field.startswith("Attribute."):
            return "InvalidAttributeName"
        if field.split(".", 1)[0] in _QUEUE_ATTRIBUTES:
            return "InvalidAttributeValue"
    if field == "MessageBody" and "character" in exc.rule:
        return "InvalidMessageContents"
    if field == "TaskHandle" and action in _MOVE_TASK_ACTIONS:
        return "ResourceNotFoundException"
    return "InvalidParameterValue"


def from_tidings(exc: TidingsError, action: str) -> SqsError:
    """A tidings error as SQS answers it for `action`.

    Statuses are SQS's own (QueueDoesNotExist is a 400 there, a 404 on the native API);
    the codes follow `server/errors.py`'s table. Move-task actions name a missing queue
    ResourceNotFoundException, the only not-found error SQS models for them.
    """
    if isinstance(exc, ValidationError):
        return SqsError(_validation_shape(exc, action), exc.message)
    if isinstance(exc, BatchError):
        return SqsError(exc.code, exc.message)
    if isinstance(exc, NotFoundError) and action in _MOVE_TASK_ACTIONS:
        return SqsError("ResourceNotFoundException", exc.message)
    _status, code, message = error_info(exc)
    return SqsError(code, message, retry_after_s=retry_after(exc))


# --- JSON protocol -----------------------------------------------------------------------


#: One encoder for every answer: `json.dumps` with separators builds a new one per call.
_encode = json.JSONEncoder(separators=(",", ":")).encode


def json_body(doc: dict[str, Any] | None) -> bytes:
    return _encode(doc or {}).encode()


def error_headers(err: SqsError) -> list[tuple[bytes, bytes]]:
    """What both protocols add to an error: a throttled caller is told when to retry (the
    JavaScript SDK waits for `Retry-After`; botocore backs off by its own rule)."""
    if err.retry_after_s is None:
        return []
    return [(b"retry-after", str(err.retry_after_s).encode())]


def json_error(err: SqsError) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    if isinstance(err, UnknownOperation):
        body = json.dumps({"__type": f"com.amazon.coral.service#{err.shape}",
                           "message": err.message})
        return err.status, [(b"x-amzn-errortype", err.shape.encode())], body.encode()
    body = json.dumps({"__type": f"com.amazonaws.sqs#{err.shape}", "message": err.message})
    headers = [(b"x-amzn-query-error", f"{err.query_code};{err.fault}".encode()),
               *error_headers(err)]
    return err.status, headers, body.encode()


def parse_json(body: bytes) -> dict[str, Any]:
    if not body:
        return {}
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise SqsError("InvalidParameterValue", "The request body is not valid JSON.") from None
    if not isinstance(doc, dict):
        raise SqsError("InvalidParameterValue", "The request body must be a JSON object.")
    return doc


# --- query protocol: requests --------------------------------------------------------------

#: Query-protocol names of flattened lists and maps → JSON member names. Maps travel as
#: `<Name>.N.Name|Key` + `<Name>.N.Value`, lists as `<Name>.N`.
_MAPS = {"Attribute": ("Attributes", "Name"), "MessageAttribute": ("MessageAttributes", "Name"),
         "MessageSystemAttribute": ("MessageSystemAttributes", "Name"),
         "Tag": ("Tags", "Key")}
_LISTS = {"AttributeName": "AttributeNames", "MessageAttributeName": "MessageAttributeNames",
          "MessageSystemAttributeName": "MessageSystemAttributeNames", "TagKey": "TagKeys",
          "AWSAccountId": "AWSAccountIds", "ActionName": "Actions",
          "SendMessageBatchRequestEntry": "Entries", "DeleteMessageBatchRequestEntry": "Entries",
          "ChangeMessageVisibilityBatchRequestEntry": "Entries",
          "StringListValue": "StringListValues", "BinaryListValue": "BinaryListValues"}


def parse_query(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """Form parameters (`Attribute.1.Name=…`) as the JSON protocol's request document."""
    tree: dict[str, Any] = {}
    for key, value in pairs:
        node = tree
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[parts[-1]] = value
    return _normalise(tree)


def _indexed(node: Any) -> list[Any]:
    """`{"1": a, "2": b}` in index order; SQS numbers members from 1."""
    if not isinstance(node, dict):
        return [node]
    items = []
    for index, value in node.items():
        if not index.isdigit():
            raise SqsError("InvalidParameterValue", f"{index!r} is not a member index")
        items.append((int(index), value))
    return [value for _, value in sorted(items)]


def _normalise(tree: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, node in tree.items():
        if key in _MAPS:
            target, key_name = _MAPS[key]
            mapping: dict[str, Any] = {}
            for entry in _indexed(node):
                if not isinstance(entry, dict) or key_name not in entry:
                    raise SqsError("MissingParameter", f"{key}.N.{key_name} is required")
                value = entry.get("Value")
                mapping[str(entry[key_name])] = (
                    _normalise(value) if isinstance(value, dict) else value)
            out[target] = mapping
        elif key in _LISTS:
            out[_LISTS[key]] = [_normalise(e) if isinstance(e, dict) else e
                                for e in _indexed(node)]
        elif isinstance(node, dict):
            out[key] = _normalise(node)
        else:
            out[key] = node
    return out


# --- query protocol: responses -------------------------------------------------------------

#: JSON member → (XML element per item, map key element or None for a plain list).
_XML_MEMBERS: dict[str, tuple[str, str | None]] = {
    "QueueUrls": ("QueueUrl", None), "queueUrls": ("QueueUrl", None),
    "Attributes": ("Attribute", "Name"), "MessageAttributes": ("MessageAttribute", "Name"),
    "Tags": ("Tag", "Key"), "Messages": ("Message", None),
    "Failed": ("BatchResultErrorEntry", None),
    "Results": ("ListMessageMoveTasksResultEntry", None),
}


#: Characters XML 1.0 cannot carry at all, escaped or not (C0 controls but tab, LF and CR;
#: lone surrogates; U+FFFE and U+FFFF). Message bodies cannot hold them (SQS's allowed
#: set), but an error message quoting bad input can: they become U+FFFD, so the answer
#: stays a document the SDK's parser reads (found by tests/integration/test_fuzz_aws.py).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    # XML parsers turn a literal CR into LF; SQS sends it as a character reference.
    return _NOT_XML.sub("\ufffd", escape(str(value))).replace("\r", "&#xD;")


def _xml(out: list[str], doc: dict[str, Any], action: str) -> None:
    for key, value in doc.items():
        if value is None:
            continue
        element, map_key = _XML_MEMBERS.get(key, (key, None))
        if key == "Successful":
            element = f"{action}ResultEntry"
        if isinstance(value, dict) and map_key is not None:
            for name, item in value.items():
                out.append(f"<{element}><{map_key}>{_text(name)}</{map_key}><Value>")
                _xml_item(out, item, action)
                out.append(f"</Value></{element}>")
        elif isinstance(value, list):
            for item in value:
                out.append(f"<{element}>")
                _xml_item(out, item, action)
                out.append(f"</{element}>")
        elif isinstance(value, dict):
            out.append(f"<{element}>")
            _xml(out, value, action)
            out.append(f"</{element}>")
        else:
            out.append(f"<{element}>{_text(value)}</{element}>")


def _xml_item(out: list[str], item: Any, action: str) -> None:
    if isinstance(item, dict):
        _xml(out, item, action)
    else:
        out.append(_text(item))


def xml_body(action: str, doc: dict[str, Any] | None, request_id: str) -> bytes:
    out = [f'<?xml version="1.0" encoding="UTF-8"?><{action}Response xmlns="{NAMESPACE}">']
    if doc is not None:
        out.append(f"<{action}Result>")
        _xml(out, doc, action)
        out.append(f"</{action}Result>")
    out.append(f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>"
               f"</{action}Response>")
    return "".join(out).encode()


def xml_error(err: SqsError, request_id: str) -> tuple[int, bytes]:
    body = (f'<?xml version="1.0" encoding="UTF-8"?><ErrorResponse xmlns="{NAMESPACE}">'
            f"<Error><Type>{err.fault}</Type><Code>{_text(err.query_code)}</Code>"
            f"<Message>{_text(err.message)}</Message><Detail/></Error>"
            f"<RequestId>{request_id}</RequestId></ErrorResponse>")
    return err.status, body.encode()


# --- request members (both protocols) ----------------------------------------------------


def required(req: Mapping[str, Any], key: str) -> Any:
    value = req.get(key)
    if value is None or value == "":
        raise SqsError("MissingParameter", f"The request must contain the parameter {key}.")
    return value


def optional_int(req: Mapping[str, Any], key: str) -> int | None:
    value = req.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return int(str(value))
    except ValueError:
        raise ValidationError(key, f"must be an integer, got {value!r}") from None


def required_int(req: Mapping[str, Any], key: str) -> int:
    value = optional_int(req, key)
    if value is None:
        raise SqsError("MissingParameter", f"The request must contain the parameter {key}.")
    return value


def string_map(req: Mapping[str, Any], key: str) -> dict[str, str]:
    value = req.get(key) or {}
    if not isinstance(value, dict):
        raise ValidationError(key, "must be a map of names to strings")
    return {str(k): str(v) for k, v in value.items()}


def string_list(req: Mapping[str, Any], key: str) -> list[str]:
    value = req.get(key) or []
    if not isinstance(value, list):
        raise ValidationError(key, "must be a list of strings")
    return [str(v) for v in value]


def parse_message_attributes(raw: Any, field: str) -> dict[str, MessageAttributeValue]:
    """Wire attributes (`{"n": {"DataType", "StringValue"|"BinaryValue"}}`, binary in base64)
    as values; the SQS rules on names, types and sizes are checked by the engine."""
    if not raw:
        return {}
    if not isinstance(raw, dict):
        raise ValidationError(field, "must be a map of attribute names to values")
    out: dict[str, MessageAttributeValue] = {}
    for name, spec in raw.items():
        if not isinstance(spec, dict) or not isinstance(spec.get("DataType"), str):
            raise ValidationError(f"{field}.{name}", "needs a DataType")
        data = decode_binary(spec.get("BinaryValue"), f"{field}.{name}.BinaryValue",
                             "must be base64-encoded")
        text = spec.get("StringValue")
        out[str(name)] = MessageAttributeValue(
            spec["DataType"], None if text is None else str(text), data)
    return out


def attribute_doc(value: MessageAttributeValue) -> dict[str, str]:
    if value.binary_value is not None:
        return {"DataType": value.data_type,
                "BinaryValue": base64.b64encode(value.binary_value).decode()}
    return {"DataType": value.data_type, "StringValue": value.string_value or ""}
