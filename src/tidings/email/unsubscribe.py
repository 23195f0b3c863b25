"""Signed, opaque per-recipient unsubscribe tokens, for List-Unsubscribe links (RFC 8058).

token = "u" base64url(tag[16] ‖ ciphertext), where the plain text is `address "\\n" list-id`,
tag = HMAC-SHA256(mac key, plain text)[:16] and the ciphertext is the plain text XORed with
HMAC-SHA256(encryption key, tag ‖ block counter) blocks. This is the synthetic-IV shape
(RFC 5297's idea, over HMAC since the standard library has no AES): the tag is both the
MAC and the IV, so a token is deterministic (one per recipient and list), unforgeable, and
says nothing readable: an address in a URL ends up in proxy logs, browser histories and
link scanners. Both keys derive from one secret kept in the store (`unsubscribe-secret`,
made on first use). The check is constant-time.

Tokens do not expire: an unsubscribe link in a years-old message must still work (RFC 8058
§3.1 asks that it keep working for a reasonable time; CAN-SPAM asks for 30 days at
least). For that reason the older readable tokens (`base64url(address "\\n" list-id)
"." MAC`, made before this format) are still honoured: they are as unforgeable, and what
they reveal is already in the mail that carried them.
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
PREFIX = "u"  # no "." in it: never mistaken for an older token
_BLOCK = hashlib.sha256().digest_size


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class UnsubscribeRequest:
    address: str
    list_id: str | None  # "list" or "list/topic"; None: mail that named no contact list


class UnsubscribeTokens:
    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the unsubscribe secret must be at least 16 bytes")
        self._secret = secret  # the older tokens' MAC key
        self._mac_key = hmac.new(secret, b"tidings unsubscribe mac", hashlib.sha256).digest()
        self._enc_key = hmac.new(secret, b"tidings unsubscribe enc", hashlib.sha256).digest()

    def _stream(self, tag: bytes, size: int) -> bytes:
        blocks = (hmac.new(self._enc_key, tag + i.to_bytes(4, "big"), hashlib.sha256).digest()
                  for i in range(-(-size // _BLOCK)))
        return b"".join(blocks)[:size]

    def _tag(self, plain: bytes) -> bytes:
        return hmac.new(self._mac_key, plain, hashlib.sha256).digest()[:MAC_BYTES]

    def make(self, address: str, list_id: str | None = None) -> str:
        plain = f"{normalise_address(address)}\n{list_id or ''}".encode()
        tag = self._tag(plain)
        cipher = bytes(a ^ b for a, b in zip(plain, self._stream(tag, len(plain)), strict=True))
        return PREFIX + _b64(tag + cipher)

    def verify(self, token: str) -> UnsubscribeRequest:
        """The request a token stands for; `ValidationError` for anything not made here."""
        bad = ValidationError("token", "is not a valid unsubscribe token")
        if len(token) > 2048:
            raise bad
        if "." in token:
            return self._verify_readable(token, bad)
        try:
            if not token.startswith(PREFIX):
                raise ValueError
            data = _unb64(token[len(PREFIX):])
        except (binascii.Error, ValueError):
            raise bad from None
        tag, cipher = data[:MAC_BYTES], data[MAC_BYTES:]
        plain = bytes(a ^ b for a, b in zip(cipher, self._stream(tag, len(cipher)),
                                            strict=True))
        if len(tag) != MAC_BYTES or not hmac.compare_digest(tag, self._tag(plain)):
            raise bad
        return _request(plain)

    def _verify_readable(self, token: str, bad: ValidationError) -> UnsubscribeRequest:
        head, _, tail = token.partition(".")
        try:
            payload, mac = _unb64(head), _unb64(tail)
        except (binascii.Error, ValueError):
            raise bad from None
        expected = hmac.new(self._secret, payload, hashlib.sha256).digest()[:MAC_BYTES]
        if not hmac.compare_digest(mac, expected):
            raise bad
        return _request(payload)


def _request(plain: bytes) -> UnsubscribeRequest:
    address, _, list_id = plain.decode("utf-8", "replace").partition("\n")
    return UnsubscribeRequest(address, list_id or None)
