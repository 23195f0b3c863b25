"""A test push: what the console's "send test push" and `tidings queue subscription test`
do. A made-up message (its id starts `test-`) signed with the subscription's secrets and
POSTed once to its endpoint, through the SSRF guard; nothing is queued or recorded."""

from __future__ import annotations

import json
import uuid

from tidings.model.messages import StoredMessage
from tidings.push.request import headers
from tidings.push.sender import Answer, PushSender
from tidings.push.service import PushService


async def send_test_push(push: PushService, queue: str) -> Answer:
    sub = push.get(queue).subscription
    now = push.clock.now_ms()
    body = json.dumps({"test": True, "queue": queue})
    message = StoredMessage(0, 0, f"test-{uuid.uuid4()}", body, "", None, None, 1, now, now,
                            now, None, None, None, None, None, None)
    raw = body.encode()
    sender = PushSender(push.guard)
    try:
        return await sender.post(sub.endpoint, raw,
                                 headers(queue, message, sub.signing_secrets(now), now, raw),
                                 timeout_s=sub.timeout_ms / 1000, pool=1)
    finally:
        await sender.close()
