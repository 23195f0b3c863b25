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

import json
from dataclasses import dataclass
from typing import Any

from tidings.model.firings import FiringContext


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
