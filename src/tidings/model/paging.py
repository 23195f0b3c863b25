"""Page tokens of the listings: the last key a page returned, base64url so callers treat it
as opaque. Listing after a key (not at an offset) never skips or repeats a row, whatever is
written between two pages."""

from __future__ import annotations

import base64

from tidings.errors import ValidationError


def page_token(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode()).decode()


def page_after(token: str | None) -> str | None:
    """The key a `page_token` holds; None for the first page (no token, or an empty one)."""
    if not token:
        return None
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        raise ValidationError("NextToken", "is not a token this API returned") from None
