"""What every target shares: delivery errors and what a function target may return."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class DeliveryError(Exception):
    """A target did not accept a delivery."""

    def __init__(self, code: str, message: str, *, retryable: bool = True,
                 retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        #: The target pushed back (HTTP 429 or 503 with Retry-After): wait this long,
        #: and do not count the attempt (downstream limits, issue 33).
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class Suppress:
    """Returned by a function target: deliver nothing (recorded as suppressed)."""

    reason: str = ""


@dataclass(frozen=True)
class Route:
    """Returned by a function target: deliver to this target instead (a queue name, or a
    `Target`), optionally with a new input."""

    target: Any
    input: Any = None
