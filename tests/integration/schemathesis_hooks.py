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
    # A string field whose content must itself be a JSON document (SES's TemplateData):
    # JSON Schema's contentMediaType annotates such a string, it does not constrain it.
    ("InvalidParameterValue", "TemplateData"): "the text is not a JSON document",
    # A receipt handle is signed by the server for one receive of one message of one queue;
    # a well-formed handle from elsewhere (another queue, an earlier receive) is refused.
    ("ReceiptHandleIsInvalid", None): "the handle was not issued for this queue",
    ("MessageNotInflight", None): "the message's visibility timeout has already run out",
    # Page tokens are opaque and signed: only one the server issued for this listing is valid.
    ("InvalidParameterValue", "NextToken"): "a token the server did not issue",
    ("InvalidParameterValue", "next_token"): "a token the server did not issue",
}


def _error(response: Any) -> tuple[str, str | None] | None:
    try:
        error = json.loads(response.content)["error"]
        return str(error["code"]), error.get("field")
    except (ValueError, KeyError, TypeError):
        return None


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
        if error is not None and (error in STATE_DEPENDENT
                                  or (error[0], None) in STATE_DEPENDENT):
            return None
    return positive_data_acceptance(ctx, response, case)  # type: ignore[no-any-return]


#: Operations that wait: a long poll answers after up to 20 s when no message comes, which
#: is right, not a finding; the fuzzer would spend the suite's time waiting.
LONG_POLLS = {("GET", "/v1/queues/{name}/messages")}


@schemathesis.hook
def before_call(ctx: Any, case: Any, **kwargs: Any) -> None:
    if (case.method.upper(), case.operation.path) in LONG_POLLS:
        case.query = {**(case.query or {}), "wait": 0}
