"""One-click unsubscribe tokens: an address and a list, encrypted and signed."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from tidings.email.unsubscribe import UnsubscribeTokens
from tidings.errors import ValidationError


def test_unsubscribe_tokens_verify_and_resist_forgery() -> None:
    tokens = UnsubscribeTokens(b"k" * 32)
    token = tokens.make("Ana@Example.org", "news/weekly")
    request = tokens.verify(token)
    assert (request.address, request.list_id) == ("ana@example.org", "news/weekly")
    assert tokens.verify(tokens.make("b@example.org")).list_id is None
    assert tokens.make("ana@example.org", "news/weekly") == token  # one per recipient/list
    other = UnsubscribeTokens(b"z" * 32)
    flipped = token[:-3] + ("A" if token[-3] != "A" else "B") + token[-2:]
    for bad in (other.make("ana@example.org", "news/weekly"), token + "x", token[1:],
                flipped, "", "u", "a.b", "!!!.???", "u" + "A" * 40):
        with pytest.raises(ValidationError):
            tokens.verify(bad)


def test_tokens_are_opaque() -> None:
    tokens = UnsubscribeTokens(b"k" * 32)
    token = tokens.make("ana@example.org", "news/weekly")
    assert "." not in token and "ana" not in token
    body = base64.urlsafe_b64decode(token[1:] + "=" * (-len(token[1:]) % 4))
    for clear in (b"ana", b"example", b"news", b"weekly"):
        assert clear not in body


def readable_token(secret: bytes, address: str, list_id: str) -> str:
    """A token in the format tidings made before opaque tokens (address readable)."""
    payload = f"{address}\n{list_id}".encode()
    mac = hmac.new(secret, payload, hashlib.sha256).digest()[:16]

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    return f"{b64(payload)}.{b64(mac)}"


def test_links_already_in_inboxes_keep_working() -> None:
    """Tokens of the older, readable format (in mail sent before) are still honoured, and
    still cannot be forged."""
    secret = b"k" * 32
    tokens = UnsubscribeTokens(secret)
    old = readable_token(secret, "ana@example.org", "news/weekly")
    request = tokens.verify(old)
    assert (request.address, request.list_id) == ("ana@example.org", "news/weekly")
    payload, mac = old.split(".")
    swapped = readable_token(secret, "eve@example.org", "news").split(".")[0] + "." + mac
    with pytest.raises(ValidationError):
        tokens.verify(swapped)
