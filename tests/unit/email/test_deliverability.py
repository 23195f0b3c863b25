"""Deliverability controls' rules: the domain-rate setting, the paces, the local day."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from tidings.email.deliverability import (
    DomainRates,
    NoLimits,
    local_midnight_ms,
    parse_domain_rates,
    recipient_zone,
    sending_limits,
)
from tidings.errors import ValidationError


def test_domain_rates_setting() -> None:
    assert parse_domain_rates("gmail.com=20, Yahoo.com=2.5,*=50") == \
        {"gmail.com": 20.0, "yahoo.com": 2.5, "*": 50.0}
    assert isinstance(sending_limits(None), NoLimits)
    assert isinstance(sending_limits("gmail.com=1"), DomainRates)
    for bad in ("gmail.com", "gmail.com=0", "gmail.com=x", "=5", "localhost=5"):
        with pytest.raises(ValidationError, match="TIDINGS_SMTP_DOMAIN_RATES"):
            parse_domain_rates(bad)


def test_each_domain_is_paced_by_its_own_bucket() -> None:
    now = [10.0]
    rates = DomainRates({"slow.example": 2, "*": 10}, clock=lambda: now[0])
    assert rates.reserve(["a@slow.example"]) == 0
    assert rates.reserve(["b@SLOW.example"]) == pytest.approx(0.5)
    assert rates.reserve(["c@fast.example"]) == 0  # another domain: not held back
    assert rates.reserve(["d@fast.example"]) == pytest.approx(0.1)
    assert rates.reserve(["e@other.example"]) == 0  # `*`: a bucket per domain
    # a message to two domains waits for the slower one
    assert rates.reserve(["Ann <f@slow.example>", "g@other.example"]) == pytest.approx(1.0)
    assert DomainRates({"slow.example": 2}).reserve(["x@unpaced.example"]) == 0


def test_the_local_day_is_the_recipients() -> None:
    now = int(datetime(2026, 12, 3, 2, 30, tzinfo=UTC).timestamp() * 1000)
    assert local_midnight_ms(now, UTC) == int(datetime(2026, 12, 3, tzinfo=UTC).timestamp()
                                              * 1000)
    la = recipient_zone({"timezone": "America/Los_Angeles"})
    assert la == ZoneInfo("America/Los_Angeles")  # 18:30 on the 2nd there
    assert local_midnight_ms(now, la) == int(datetime(
        2026, 12, 2, tzinfo=ZoneInfo("America/Los_Angeles")).timestamp() * 1000)
    assert recipient_zone({"timezone": "Not/AZone"}) is UTC
    assert recipient_zone({}) is UTC
