"""Email deliveries: their state machine and the message a sender asks for.

A delivery is one message to its recipients (To + Cc + Bcc), logged from the moment it is
accepted (QUEUED) to its outcome. SENT means the relay accepted it (250 after DATA): what
happens after the relay is the relay's business, as with SES's "Send" event.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tidings.errors import ValidationError
from tidings.model.states import FINAL_DELIVERY_STATES
from tidings.model.states import DeliveryState as DeliveryState  # re-exported: its home for users

#: Outcomes no delivery attempt changes (see `tidings.model.states.DELIVERIES`).
FINAL_STATES = FINAL_DELIVERY_STATES


class SuppressionReason(StrEnum):
    BOUNCE = "BOUNCE"  # the relay refused the address permanently (5xx)
    COMPLAINT = "COMPLAINT"  # the recipient marked a message as spam (reported by the user)
    UNSUBSCRIBE = "UNSUBSCRIBE"  # an unsubscribe from mail that named no contact list
    MANUAL = "MANUAL"  # added by an operator


@dataclass(frozen=True)
class Suppression:
    address: str  # normalised
    reason: SuppressionReason
    created_at: int


@dataclass(frozen=True)
class StoredTemplate:
    name: str
    subject: str
    html: str | None
    text: str | None
    created_at: int
    modified_at: int


@dataclass(frozen=True)
class Delivery:
    """One row of the delivery log."""

    id: str  # the execution id of a schedule's firing, or the id a send returned
    message_id: str
    sender: str
    recipients: tuple[str, ...]  # envelope recipients (To + Cc + Bcc)
    state: DeliveryState
    created_at: int
    updated_at: int
    execution_id: str | None = None
    schedule: str | None = None  # group/name
    template: str | None = None
    detail: str | None = None  # the relay's reply or the error
    attempts: int = 0
    seq: int = 0  # log order, assigned by the store
    document: str | None = None  # the delivery job, kept so a failed one can be resent


# A pragmatic address check (RFC 5321 sizes, one @, no spaces or angle brackets): the relay
# is the final judge; this only keeps header injection and obvious typos out.
_ADDRESS = re.compile(r"^[^@\s<>,;:\"()\[\]\\]+@[^@\s<>,;:\"()\[\]\\]+\.[^@\s<>,;:\"()\[\]\\]+$")
_DISPLAY = re.compile(r"^\s*(?P<name>.*?)\s*<(?P<addr>[^<>]+)>\s*$")
MAX_RECIPIENTS = 50  # SES: at most 50 recipients (To + Cc + Bcc) per message


def normalise_address(address: str) -> str:
    """The suppression list's key: trimmed and lower-cased (as SES compares addresses)."""
    return address.strip().lower()


def split_display(value: str) -> tuple[str, str]:
    """("Name", "addr@x") from `Name <addr@x>`, or ("", value) for a bare address."""
    if "<" not in value:  # a bare address (no display form can match): no regex
        return "", value.strip()
    m = _DISPLAY.match(value)
    if m:
        return m.group("name").strip().strip('"'), m.group("addr").strip()
    return "", value.strip()


def check_address(field_name: str, value: object) -> str:
    """Validate one address (a display name is allowed: `Ana <ana@example.com>`)."""
    if not isinstance(value, str):  # (not hashable, maybe: before the cache)
        raise ValidationError(field_name, "must be an email address")
    return _check_address(field_name, value)


@functools.lru_cache(maxsize=4096)  # pure; a send's sender is checked once, not per message
def _check_address(field_name: str, value: str) -> str:
    if not value.strip():
        raise ValidationError(field_name, "must be an email address")
    if "\r" in value or "\n" in value:
        raise ValidationError(field_name, "must not contain line breaks")
    _, addr = split_display(value)
    if len(addr) > 254 or not _ADDRESS.match(addr):
        raise ValidationError(field_name, f"{value!r} is not a valid email address")
    if not addr.rpartition("@")[0].isascii():
        # SES too: the local part must be 7-bit ASCII (no SMTPUTF8); domains may be IDNs.
        raise ValidationError(field_name, "the part before @ must be ASCII")
    return value.strip()


def bare_address(value: str) -> str:
    return split_display(value)[1]


@dataclass(frozen=True)
class EmailMessage:
    """One send request: a stored template with its data, or a simple subject and body."""

    from_address: str
    to: tuple[str, ...] = ()
    cc: tuple[str, ...] = ()
    bcc: tuple[str, ...] = ()
    reply_to: tuple[str, ...] = ()
    template: str | None = None
    template_data: dict[str, Any] = field(default_factory=dict)
    subject: str | None = None
    text: str | None = None
    html: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    tags: tuple[tuple[str, str], ...] = ()
    list_id: str | None = None  # ListManagementOptions, "ContactList/Topic"
    #: One-click unsubscribe headers. None: as SES, only when the send names a contact
    #: list (`list_id`); True or False: the sender's choice (a campaign's target says True).
    unsubscribe: bool | None = None

    @property
    def carries_unsubscribe(self) -> bool:
        """Whether the message gets List-Unsubscribe and List-Unsubscribe-Post. Mail sent
        to one person about their own business (an invoice, a password reset) must not:
        one click on it would stop every later message to the address."""
        return self.list_id is not None if self.unsubscribe is None else self.unsubscribe

    @functools.cached_property
    def recipients(self) -> tuple[str, ...]:
        """Envelope recipients, bare addresses, in order, each once (Bcc included);
        worked out once a message (a delivery asks for them several times)."""
        seen: dict[str, None] = {}
        for value in (*self.to, *self.cc, *self.bcc):
            seen.setdefault(bare_address(value), None)
        return tuple(seen)

    def validated(self) -> EmailMessage:
        check_address("FromEmailAddress", self.from_address)
        for name, values in (("Destination.ToAddresses", self.to),
                             ("Destination.CcAddresses", self.cc),
                             ("Destination.BccAddresses", self.bcc),
                             ("ReplyToAddresses", self.reply_to)):
            for v in values:
                check_address(name, v)
        count = len(self.to) + len(self.cc) + len(self.bcc)
        if count == 0:
            raise ValidationError("Destination", "must name at least one recipient")
        if count > MAX_RECIPIENTS:
            raise ValidationError("Destination", f"at most {MAX_RECIPIENTS} recipients "
                                  "(To, Cc and Bcc together)")
        if self.template is None:
            if self.subject is None:
                raise ValidationError("Content.Simple.Subject", "is required")
            if "\r" in self.subject or "\n" in self.subject:
                raise ValidationError("Content.Simple.Subject", "must not contain line breaks")
            if not self.text and not self.html:
                raise ValidationError("Content.Simple.Body", "must have Text, Html or both")
        for name, value in self.headers:
            if not re.match(r"^[A-Za-z0-9-]{1,76}$", name):
                raise ValidationError("Headers.Name", f"{name!r} is not a header name")
            if "\r" in value or "\n" in value:
                raise ValidationError("Headers.Value", "must not contain line breaks")
        for name, value in self.tags:
            if not re.match(r"^[A-Za-z0-9_-]{1,256}$", name) or \
                    not re.match(r"^[A-Za-z0-9_.@-]{0,256}$", value):
                raise ValidationError("EmailTags", "names and values are ASCII letters, "
                                      "digits, '_', '-' (values also '.' and '@')")
        return self
