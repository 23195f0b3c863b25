"""Header injection is impossible: every field refuses line breaks at the door, and what
is rendered (a subject filled from a recipient's data) can never start a header."""

from __future__ import annotations

from email import message_from_bytes, policy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.email.mime import Outgoing, message_bytes
from tidings.errors import ValidationError
from tidings.model.email import EmailMessage

EVIL = "x\r\nBcc: victim@example.net"


@pytest.mark.parametrize("fields", [
    {"from_address": f"News {EVIL} <news@example.com>"},
    {"to": (f"ana@example.org{EVIL}",)},
    {"cc": (f"Ana{EVIL} <ana@example.org>",)},
    {"bcc": ("b@example.org\nX: y",)},
    {"reply_to": (f"r@example.org{EVIL}",)},
    {"subject": f"Hi {EVIL}"},
    {"subject": "Hi\rthere"},
    {"headers": (("X-Campaign", EVIL),)},
    {"headers": (("X-Campaign\r\nBcc", "v"),)},
    {"tags": (("campaign", EVIL),)},
])
def test_every_field_refuses_line_breaks(fields: dict[str, object]) -> None:
    base: dict[str, object] = {"from_address": "news@example.com", "to": ("ana@example.org",),
                               "subject": "Hi", "text": "Hello"}
    with pytest.raises(ValidationError):
        EmailMessage(**{**base, **fields}).validated()  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(subject=st.text(), value=st.text())
def test_rendered_text_never_adds_a_header(subject: str, value: str) -> None:
    out = Outgoing(from_address="news@example.com", to=("ana@example.org",), cc=(),
                   reply_to=(), subject=subject, text="Hello", html=None,
                   message_id="1@example.com", date_ms=0, headers=(("X-Campaign", value),))
    msg = message_from_bytes(message_bytes(out), policy=policy.compat32)
    assert sorted(msg.keys()) == sorted(["From", "To", "Subject", "Date", "Message-ID",
                                         "X-Campaign", "MIME-Version", "Content-Type",
                                         "Content-Transfer-Encoding"])
