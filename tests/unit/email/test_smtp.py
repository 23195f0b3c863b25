"""The relay URL and the token bucket that paces sends through it."""

from __future__ import annotations

import pytest

from tidings.email.smtp import RelayConfig, TokenBucket
from tidings.errors import ValidationError


def test_relay_urls() -> None:
    plain = RelayConfig.parse("smtp://127.0.0.1:1025")
    assert (plain.host, plain.port, plain.implicit_tls, plain.username) == \
        ("127.0.0.1", 1025, False, None)
    sub = RelayConfig.parse("smtp://us%40er:p%3Ass@mail.example.com?starttls=require")
    assert (sub.port, sub.username, sub.password, sub.start_tls) == \
        (587, "us@er", "p:ss", True)
    assert "p:ss" not in sub.safe_url and "p%3Ass" not in sub.safe_url
    tls = RelayConfig.parse("smtps://mail.example.com?verify=false&timeout=5")
    assert (tls.port, tls.implicit_tls, tls.verify, tls.timeout_s) == (465, True, False, 5.0)
    for bad in ("http://x", "smtp://", "smtp://h:99999", "smtp://h?starttls=maybe"):
        with pytest.raises(ValidationError):
            RelayConfig.parse(bad)


def test_token_bucket_paces_in_arrival_order() -> None:
    now = [100.0]
    bucket = TokenBucket(50, clock=lambda: now[0])
    waits = [bucket.reserve() for _ in range(5)]
    assert waits == pytest.approx([0.0, 0.02, 0.04, 0.06, 0.08])
    now[0] += 10  # idle time saves up at most `burst` (1) token
    assert bucket.reserve() == 0.0 and bucket.reserve() == pytest.approx(0.02)
    burst = TokenBucket(10, burst=3, clock=lambda: now[0])
    now[0] += 5
    assert [burst.reserve() for _ in range(4)] == pytest.approx([0, 0, 0, 0.1])
