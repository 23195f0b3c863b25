"""The time-travel kit's relay: every message the email target would send over SMTP is
kept instead, as the exact bytes plus what a test asserts on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default as default_policy

from tidings.clock import from_ms
from tidings.email.smtp import SendResult


@dataclass(frozen=True)
class SentEmail:
    """One message as the relay received it, at the simulated instant it was sent."""

    sender: str
    recipients: tuple[str, ...]
    at: datetime
    data: bytes

    @property
    def message(self) -> EmailMessage:
        parsed = message_from_bytes(self.data, policy=default_policy)
        assert isinstance(parsed, EmailMessage)
        return parsed

    @property
    def subject(self) -> str:
        return str(self.message["Subject"] or "")

    @property
    def to(self) -> str:
        return str(self.message["To"] or "")

    def body(self, subtype: str = "plain") -> str:
        """The text (or `"html"`) part, decoded."""
        part = self.message.get_body(preferencelist=(subtype,))
        return "" if part is None else str(part.get_content())


class CapturingRelay:
    """Stands where the SMTP sender stands (`tidings.targets.email.Relay`)."""

    def __init__(self, now_ms: Callable[[], int]) -> None:
        self.now_ms = now_ms
        self.sent: list[SentEmail] = []

    async def send(self, url: str, sender: str, recipients: Sequence[str],
                   data: bytes) -> SendResult:
        self.sent.append(SentEmail(sender, tuple(recipients), from_ms(self.now_ms()), data))
        return SendResult("250 kept by tidings.testing", {})

    async def close(self) -> None:
        return None
