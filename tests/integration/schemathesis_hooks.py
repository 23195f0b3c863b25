"""schemathesis hooks for test_fuzz_native.py: only what a schema cannot say.

Every rule the server applies to a request's shape is in the OpenAPI document
(server/native/rules.py); the fuzzer must find nothing against it. What stays here are
refusals that depend on what the server holds when the request arrives, which no schema of
the request can state. schemathesis's `positive_data_acceptance` expects a schema-valid
request to be answered 2xx, 401, 403, 404, 409 or 429: a 400 is a failure. The refusals below
are 400s by the API's contract (the SQS codes the AWS face shares), so the check is run as
`positive_data_acceptance_given_state`, the built-in check except for a 400 whose error is
one of these, each for the reason written beside it. Any other 400 to a schema-valid request
still fails.
"""

from __future__ import annotations

import json
from typing import Any

import schemathesis
from schemathesis.specs.openapi.checks import positive_data_acceptance

#: (error code, field or None for any) -> why a schema-valid request may get it.
STATE_DEPENDENT: dict[tuple[str, str | None], str] = {
    # What the queue named in the path is decides these, not the request: a FIFO queue needs
    # a group id, a standard one refuses a deduplication id; a queue's kind is fixed once
    # made; a delay or message may not exceed that queue's retention or maximum size.
    ("InvalidParameterValue", "FifoQueue"): "the stored queue's kind, or the name's .fifo",
    ("InvalidParameterValue", "ContentBasedDeduplication"): "FIFO queues only",
    ("InvalidParameterValue", "MessageDeduplicationId"): "depends on the queue's kind",
    ("InvalidParameterValue", "MessageGroupId"): "depends on the queue's kind",
    ("InvalidParameterValue", "DelaySeconds"): "the queue's kind and retention",
    ("InvalidParameterValue", "deliver_at"): "the queue's kind and retention, and now",
    ("InvalidParameterValue", "MessageBody"): "the queue's maximum message size",
    # Redrive moves messages out of a dead-letter queue: whether the queue is one is a fact
    # about the other queues (their redrive policies), and a task handle names a task that
    # is running now or not.
    ("InvalidParameterValue", "SourceArn"): "the queue is not a dead-letter queue now",
    ("InvalidParameterValue", "TaskHandle"): "no message move task with this handle runs now",
    ("InvalidParameterValue", "RedrivePolicy.deadLetterTargetArn"): "the named queue's state",
    # Ids unique within one batch: JSON Schema's uniqueItems compares whole entries, and
    # cannot say "unique by `id`".
    ("InvalidParameterValue", "Entries.Id"): "ids repeated within the batch",
    # Not yet in the document: byQueue needs 1-10 source queues, the other permissions
    # none (a rule between two fields; JSON Schema's if/then could state it).
    ("InvalidParameterValue", "RedriveAllowPolicy.sourceQueueArns"): "cross-field, to state",
    # Schedules: whether the target queue (or dead-letter queue) exists, is FIFO (then it
    # needs a group id) or is standard, is the stored queues'; a webhook host may be
    # refused by the node's own allow-list (TIDINGS_WEBHOOK_ALLOW, https only).
    ("InvalidParameterValue", "Target.Arn"): "the target queue now, or the node's allow-list",
    ("InvalidParameterValue", "Target.SqsParameters.MessageGroupId"): "the queue's kind",
    ("InvalidParameterValue", "Target.DeadLetterConfig.Arn"): "the named queue's state",
    # A pause's end must be ahead of now and within a year of it: the clock decides.
    ("InvalidParameterValue", "until"): "the instant against now",
    # A campaign's status (a cancelled one is never paused or resumed) is the stored one's.
    ("InvalidParameterValue", "Status"): "the campaign's status now",
    # A fan-out's recipient list is CSV or JSON Lines text: its header must name the
    # columns the query names and the template's variables (the body's text, not a shape).
    ("InvalidParameterValue", "Columns"): "the list's header against the columns named",
    ("InvalidParameterValue", "template"): "the list's header against the template",
    ("InvalidParameterValue", "contact_list"): "the stored contact lists",
    # A string field whose content must itself be a JSON document (SES's TemplateData):
    # JSON Schema's contentMediaType annotates such a string, it does not constrain it.
    ("InvalidParameterValue", "TemplateData"): "the text is not a JSON document",
    ("InvalidParameterValue", "AttributesData"): "the text is not a JSON object",
    # A Raw message's own headers (From, To, Cc, Bcc) inside the base64 of its MIME text.
    ("InvalidParameterValue", "Content.Raw.Data"): "the MIME message in the base64",
    ("InvalidParameterValue", "Content.Raw.Data From"): "the message's From header",
    ("InvalidParameterValue", "Content.Raw.Data To"): "the message's To header",
    ("InvalidParameterValue", "Content.Raw.Data Cc"): "the message's Cc header",
    ("InvalidParameterValue", "Content.Raw.Data Bcc"): "the message's Bcc header",
    # A contact's topic preferences, a contact filter's topic and a send's list and topic
    # name topics and lists that must exist in the stored contact list.
    ("InvalidParameterValue", "TopicPreferences.TopicName"): "a topic of the stored list",
    ("InvalidParameterValue", "Filter.TopicFilter.TopicName"): "a topic of the stored list",
    ("InvalidParameterValue", "ListManagementOptions"): "the stored list and topic",
    ("InvalidParameterValue", "ListManagementOptions.TopicName"): "a topic of the list",
    # A receipt handle is signed by the server for one receive of one message of one queue;
    # a well-formed handle from elsewhere (another queue, an earlier receive) is refused.
    ("ReceiptHandleIsInvalid", None): "the handle was not issued for this queue",
    ("MessageNotInflight", None): "the message's visibility timeout has already run out",
    # Page tokens are opaque and signed: only one the server issued for this listing is valid.
    ("InvalidParameterValue", "NextToken"): "a token the server did not issue",
    ("InvalidParameterValue", "next_token"): "a token the server did not issue",
}


#: Rules a request's shape decides but a JSON Schema cannot state at a sane size, each
#: named by its error's code, field and a piece of its message, with the reason.
BEYOND_A_SCHEMA: dict[tuple[str, str, str], str] = {
    # One field against another: JSON Schema compares a value with constants only.
    ("InvalidParameterValue", "EndDate", "after StartDate"): "end after start",
    # Items unique by one of their fields: uniqueItems compares whole items.
    ("InvalidParameterValue", "Topics", "appear once"): "topic names unique in the list",
    # 1-50 recipients in To, Cc and Bcc together: a sum over three lists (a Raw message
    # may name them in its headers instead).
    ("InvalidParameterValue", "Destination", "recipient"): "To, Cc and Bcc together",
    # A fan-out's query parameters against each other: OpenAPI states each parameter on
    # its own (it has no oneOf across parameters), so "one timing" and "quiet hours that
    # leave room for the flexible window" are the engine's to say.
    ("InvalidParameterValue", "Timing", ""): "one of local_time+on, next, at_column",
    ("InvalidParameterValue", "QuietHours", "differ"): "its two ends differ",
    ("InvalidParameterValue", "QuietHours", "flexible"): "room for the flexible window",
    ("InvalidParameterValue", "Step", "unique"): "step names unique among the steps",
    ("InvalidParameterValue", "topic", "needs the contact list"): "topic with contact_list",
    ("InvalidParameterValue", "topic", "is not a topic"): "a topic of the stored list",
    # A cron range's two ends in order (`5-3` runs backwards): a pattern could list every
    # ordered pair of every field's values, a pattern of many kilobytes per field.
    ("InvalidParameterValue", "ScheduleExpression", "runs backwards"): "ordered ranges",
    # The length of a JSON value's text, once encoded (a target's input, up to 8192).
    ("InvalidParameterValue", "Target.Input", "characters"): "the encoded length",
    # A push endpoint's host refused by the node's webhook allow-list: its configuration.
    ("InvalidParameterValue", "endpoint", "TIDINGS_WEBHOOK"): "the node's allow-list",
}


def _error(response: Any) -> tuple[str, str | None, str] | None:
    try:
        error = json.loads(response.content)["error"]
        return str(error["code"]), error.get("field"), str(error.get("message", ""))
    except (ValueError, KeyError, TypeError):
        return None


def _allowed(error: tuple[str, str | None, str]) -> bool:
    code, field, message = error
    if (code, field) in STATE_DEPENDENT or (code, None) in STATE_DEPENDENT:
        return True
    return any(code == c and field == f and fragment in message
               for c, f, fragment in BEYOND_A_SCHEMA)


#: Operations whose 400 is always about state: an unsubscribe token is signed by the
#: deployment for one address, so a well-formed token it did not make is "not valid" (the
#: answer is an HTML page for a person, documented as such).
STATE_DEPENDENT_OPERATIONS = {("GET", "/unsubscribe/{token}"), ("POST", "/unsubscribe/{token}")}


@schemathesis.check
def positive_data_acceptance_given_state(ctx: Any, response: Any, case: Any) -> bool | None:
    if (response.status_code == 400
            and (case.method.upper(), case.operation.path) in STATE_DEPENDENT_OPERATIONS):
        return None
    if response.status_code == 400:
        error = _error(response)
        if error is not None and _allowed(error):
            return None
    return positive_data_acceptance(ctx, response, case)  # type: ignore[no-any-return]


#: Operations that wait: a long poll answers after up to 20 s when no message comes, which
#: is right, not a finding; the fuzzer would spend the suite's time waiting.
LONG_POLLS = {("GET", "/v1/queues/{name}/messages")}


@schemathesis.hook
def before_call(ctx: Any, case: Any, **kwargs: Any) -> None:
    if (case.method.upper(), case.operation.path) in LONG_POLLS:
        case.query = {**(case.query or {}), "wait": 0}
