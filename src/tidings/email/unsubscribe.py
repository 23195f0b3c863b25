"""Signed per-recipient unsubscribe tokens, for List-Unsubscribe links (RFC 8058).

token = base64url(address "\\n" list-id) "." base64url(HMAC-SHA256(secret, same bytes)[:16])

The address is carried in the token (nothing to look up, nothing to store per message);
the MAC, keyed with a secret kept in the store (`unsubscribe-secret`, made on first use),
makes a token unforgeable, so nobody can unsubscribe someone else by guessing URLs. 128
bits of MAC is ample against online guessing. The check is constant-time. Tokens do not
expire: an unsubscribe link in a years-old message must still work (RFC 8058 §3.1 asks
that it keep working for a reasonable time; CAN-SPAM asks for 30 days at least).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

from tidings.errors import ValidationError
from tidings.model.email import normalise_address

MAC_BYTES = 16


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class UnsubscribeRequest:
    address: str
    list_id: str | None


class UnsubscribeTokens:
    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the unsubscribe secret must be at least 16 bytes")
        self._secret = secret

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()[:MAC_BYTES]

    def make(self, address: str, list_id: str | None = None) -> str:
        payload = f"{normalise_address(address)}\n{list_id or ''}".encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def verify(self, token: str) -> UnsubscribeRequest:
        """The request a token stands for; `ValidationError` for anything not made here."""
        bad = ValidationError("token", "is not a valid unsubscribe token")
        head, dot, tail = token.partition(".")
        if not dot or len(token) > 2048:
            raise bad
        try:
            payload, mac = _unb64(head), _unb64(tail)
        except (binascii.Error, ValueError):
            raise bad from None
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise bad
        address, _, list_id = payload.decode("utf-8", "replace").partition("\n")
        return UnsubscribeRequest(address, list_id or None)
