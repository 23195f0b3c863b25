"""Push subscriptions: a queue whose messages the nodes POST to an HTTP endpoint.

The record, its state machine and the rules of its fields, pure: the store keeps it
(`store/push.py`), `tidings.push` runs it. Secrets are Standard Webhooks secrets
(`whsec_` + base64 of 32 random bytes), so a receiver verifies a push with any of the
Standard Webhooks libraries.
"""

from __future__ import annotations

import base64
import re
import secrets
from dataclasses import dataclass, replace
from enum import StrEnum

from tidings.errors import NotFoundError, ValidationError

MAX_CONCURRENCY = 1000
DEFAULT_CONCURRENCY = 20
DEFAULT_TIMEOUT_MS = 30_000
MAX_TIMEOUT_MS = 15 * 60_000
#: How long a rotated-out secret still signs pushes beside the new one.
DEFAULT_ROTATION_GRACE_MS = 24 * 3600_000
SECRET_PREFIX = "whsec_"


class SubscriptionNotFound(NotFoundError):
    """The queue has no push subscription."""

    kind = "push subscription of queue"


class SubscriptionState(StrEnum):
    ACTIVE = "active"  # its messages are pushed
    PAUSED = "paused"  # by its owner: nothing is pushed, messages wait in the queue


#: Every move a subscription's state may make; `PushService.set_state` asks it before its
#: compare-and-set write. (A hold for an endpoint's Retry-After is not a state: it is a
#: pause of the subscription's limit key, `push:<queue>`, that passes by itself.)
SUBSCRIPTION_TRANSITIONS: dict[SubscriptionState, frozenset[SubscriptionState]] = {
    SubscriptionState.ACTIVE: frozenset({SubscriptionState.PAUSED}),
    SubscriptionState.PAUSED: frozenset({SubscriptionState.ACTIVE}),
}


def check_transition(current: SubscriptionState, new: SubscriptionState) -> None:
    if new not in SUBSCRIPTION_TRANSITIONS[current]:
        raise ValidationError("state", f"a subscription that is {current.value} cannot "
                              f"become {new.value}")


@dataclass(frozen=True)
class Subscription:
    id: int
    queue_id: int
    endpoint: str
    concurrency: int
    rate_per_s: float | None  # None: as fast as the concurrency allows
    timeout_ms: int
    state: SubscriptionState
    secret: str
    previous_secret: str | None
    previous_until: int | None
    created_at: int
    modified_at: int
    version: int

    def signing_secrets(self, now: int) -> list[str]:
        """The secrets a push is signed with now: the current one, and the previous one
        while its rotation grace lasts."""
        if self.previous_secret and (self.previous_until or 0) > now:
            return [self.secret, self.previous_secret]
        return [self.secret]

    def changed(self, **fields: object) -> Subscription:
        return replace(self, **fields)  # type: ignore[arg-type]


@dataclass(frozen=True)
class SubscriptionFailure:
    """One failed push, as the console lists it."""

    at: int
    message_id: str
    status: int | None  # the endpoint's status; None when it gave none (timeout, refused)
    error: str


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def check_endpoint(url: str) -> str:
    if not re.match(r"^https?://[^/\s]+", url or ""):
        raise ValidationError("endpoint", "must be an http:// or https:// URL with a host")
    return url


def check_concurrency(value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_CONCURRENCY:
        raise ValidationError("concurrency", f"must be an integer from 1 to {MAX_CONCURRENCY}")
    return value


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*(s|sec|second|m|min|minute|h|hour))?\s*$")
_PER = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600,
        "hour": 3600}


def parse_rate(value: str | float | None) -> float | None:
    """`100/s`, `600/m`, `5` (per second) → pushes per second; None or "" for no limit."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number, per = float(value), 1
    else:
        match = _RATE.match(str(value))
        if not match:
            raise ValidationError("rate", "must look like 100/s, 600/m or 3600/h")
        number, per = float(match.group(1)), _PER[match.group(2) or "s"]
    if number / per * 3600 < 1:
        raise ValidationError("rate", "must be at least 1/h")
    return number / per


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*$")


def parse_timeout_ms(value: str | float | None) -> int:
    """`30s`, `500ms`, `2m`, or a number of seconds → milliseconds, 1 ms to 15 minutes."""
    if value is None or value == "":
        return DEFAULT_TIMEOUT_MS
    if isinstance(value, int | float) and not isinstance(value, bool):
        ms = float(value) * 1000
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise ValidationError("timeout", "must look like 30s, 500ms or 2m")
        ms = float(match.group(1)) * {"ms": 1, "s": 1000, "m": 60_000}[match.group(2) or "s"]
    if not 1 <= ms <= MAX_TIMEOUT_MS:
        raise ValidationError("timeout", "must be from 1 ms to 15 minutes")
    return int(ms)


def rate_text(rate_per_s: float | None) -> str | None:
    return None if rate_per_s is None else f"{rate_per_s:g}/s"
