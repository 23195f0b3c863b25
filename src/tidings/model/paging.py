"""Page tokens of the listings: the last key a page returned, base64url so callers treat it
as opaque. Listing after a key (not at an offset) never skips or repeats a row, whatever is
written between two pages."""

from __future__ import annotations

import base64
import json
from typing import Any

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


def compound_token(key: list[str]) -> str:
    """A token for a key of several parts (a schedule's group and name), as a JSON list."""
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode()


def compound_after(token: str) -> list[str]:
    """The key a `compound_token` holds."""
    try:
        parts: Any = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, UnicodeDecodeError):
        raise ValidationError("NextToken", "is not a token this API returned") from None
    if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
        raise ValidationError("NextToken", "is not a token this API returned")
    return parts
