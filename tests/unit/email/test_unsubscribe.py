"""One-click unsubscribe tokens: an address and a list, signed."""

from __future__ import annotations

import pytest

from tidings.email.unsubscribe import UnsubscribeTokens
from tidings.errors import ValidationError


def test_unsubscribe_tokens_verify_and_resist_forgery() -> None:
    tokens = UnsubscribeTokens(b"k" * 32)
    token = tokens.make("Ana@Example.org", "news/weekly")
    request = tokens.verify(token)
    assert (request.address, request.list_id) == ("ana@example.org", "news/weekly")
    assert tokens.verify(tokens.make("b@example.org")).list_id is None
    other = UnsubscribeTokens(b"z" * 32)
    for bad in (other.make("ana@example.org", "news/weekly"), token + "x", token[1:],
                token.replace(".", ""), "", "a.b", "!!!.???"):
        with pytest.raises(ValidationError):
            tokens.verify(bad)
    payload, mac = token.split(".")
    swapped = tokens.make("eve@example.org").split(".")[0] + "." + mac
    with pytest.raises(ValidationError):
        tokens.verify(swapped)
