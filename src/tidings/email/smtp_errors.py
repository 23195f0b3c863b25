"""What a send through a relay comes to: the relay's final reply, or why not.

4xx replies, lost connections and timeouts raise `SmtpTemporaryError` (try again later);
5xx raise `SmtpPermanentError`, naming the refused recipients (all of them when the relay
refused the message itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class SmtpTemporaryError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code} {message}" if code else message)
        self.code = code
        self.message = message


class SmtpSlowDown(SmtpTemporaryError):
    """The relay refused every recipient with "slow down" at RCPT (e.g. `450 4.7.1 too
    many messages to this domain`): a pace set for the recipients' domains, not for the
    relay, so those domains are held (`domain_holds.py`) and other mail goes on."""

    def __init__(self, code: int, message: str, domains: Sequence[str]) -> None:
        super().__init__(code, message)
        self.domains = tuple(domains)


class SmtpPermanentError(Exception):
    def __init__(self, code: int, message: str, refused: Sequence[str]) -> None:
        super().__init__(f"{code} {message}")
        self.code = code
        self.message = message
        self.refused = tuple(refused)


@dataclass(frozen=True)
class SendResult:
    reply: str  # the relay's answer to DATA, e.g. "250 OK queued as 4F2A"
    refused: dict[str, str]  # recipients refused while others were accepted: address → reply
