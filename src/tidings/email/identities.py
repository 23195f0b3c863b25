"""Verified identities: the senders this node may send as.

As SES requires, the `From` address of every message (the SES API, the native API, the
Python API and email targets) must be a verified identity: an address
(`news@example.com`) or a whole domain (`example.com`). Identities come from
`TIDINGS_EMAIL_IDENTITIES` and from SES v2's CreateEmailIdentity (kept in the database;
tidings has no DNS to verify against, so creating one verifies it).

Enforced when any identity exists or the node listens beyond loopback: there, with none,
every send is refused and the error says how to add one. A node on loopback with none
keeps accepting any sender (development, as before).
"""

from __future__ import annotations

import email.parser
import email.policy
import email.utils
import threading
import time

from tidings.clock import Clock
from tidings.errors import NotFoundError, ValidationError
from tidings.model.audit import EmailIdentity
from tidings.model.email import EmailMessage, bare_address
from tidings.settings import Settings
from tidings.store.base import SecurityStore

CACHE_S = 5.0  # how long another node's CreateEmailIdentity may go unseen here
_HEADERS = email.parser.BytesHeaderParser(policy=email.policy.compat32)


class SenderNotVerified(ValidationError):
    """The sender is not a verified identity of this node (SES: MessageRejected)."""


class IdentityNotFound(NotFoundError):
    """The email identity does not exist."""

    kind = "email identity"


def normalise_identity(field: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(field, "must be an email address or a domain")
    identity = value.strip().lower()
    local, at, domain = identity.rpartition("@")
    if any(c.isspace() or c in "<>,;\"\\()[]" for c in identity) or "." not in domain or \
            (at and not local) or len(identity) > 320:
        raise ValidationError(field, f"{value!r} is not an email address or a domain")
    return identity


def senders_of(msg: EmailMessage) -> list[str]:
    """Every address the message says it is from: `From` and, for a raw message, the
    From of its own headers too (SES checks both)."""
    out = [bare_address(msg.from_address).lower()]
    raw = getattr(msg, "raw", None)
    if isinstance(raw, bytes) and raw:
        header = _HEADERS.parsebytes(raw).get("From")
        if header:
            out += [addr.lower() for _, addr in email.utils.getaddresses([str(header)]) if addr]
    return list(dict.fromkeys(out))


class Identities:
    def __init__(self, store: SecurityStore, clock: Clock, settings: Settings) -> None:
        self.store = store
        self.clock = clock
        self.configured = frozenset(
            normalise_identity("TIDINGS_EMAIL_IDENTITIES", item)
            for item in (settings.email_identities or "").split(",") if item.strip())
        self.exposed = not settings.loopback_only
        self._stored: frozenset[str] = frozenset()
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    def _current(self) -> frozenset[str]:
        with self._lock:
            if time.monotonic() - self._read_at > CACHE_S:
                self._stored = frozenset(i.identity for i in self.store.list_email_identities())
                self._read_at = time.monotonic()
            return self.configured | self._stored

    def _forget(self) -> None:
        with self._lock:
            self._read_at = float("-inf")

    def check_sender(self, msg: EmailMessage, field: str = "FromEmailAddress") -> None:
        """Raise `ValidationError` unless every sender of `msg` is verified here."""
        allowed = self._current()
        if not allowed and not self.exposed:
            return  # a development node: any sender
        for sender in senders_of(msg):
            domain = sender.rpartition("@")[2]
            if sender not in allowed and domain not in allowed:
                hint = ("" if allowed else " (this node has none: set "
                        "TIDINGS_EMAIL_IDENTITIES or create one with the SES v2 API)")
                raise SenderNotVerified(field, f"Email address is not verified. The following "
                                      f"identities failed the check: {sender}{hint}")

    # SES v2 email identities ---------------------------------------------------------------

    def create(self, identity: str) -> bool:
        """False when it existed already (also when it is a configured one)."""
        ident = normalise_identity("EmailIdentity", identity)
        if ident in self.configured:
            return False
        made = self.store.add_email_identity(ident, self.clock.now_ms())
        self._forget()
        return made

    def delete(self, identity: str) -> None:
        ident = normalise_identity("EmailIdentity", identity)
        if ident in self.configured:
            raise ValidationError("EmailIdentity", f"{ident} comes from "
                                  "TIDINGS_EMAIL_IDENTITIES; remove it there")
        if not self.store.delete_email_identity(ident):
            raise IdentityNotFound(ident, f"Email identity {ident} does not exist.")
        self._forget()

    def list(self) -> list[EmailIdentity]:
        stored = {i.identity: i for i in self.store.list_email_identities()}
        for ident in self.configured - set(stored):
            stored[ident] = EmailIdentity(ident, 0)
        return [stored[k] for k in sorted(stored)]

    def get(self, identity: str) -> EmailIdentity:
        ident = normalise_identity("EmailIdentity", identity)
        for found in self.list():
            if found.identity == ident:
                return found
        raise IdentityNotFound(ident, f"Email identity {ident} does not exist.")
