"""Where a node sends email from (`TIDINGS_EMAIL_SENDER`), and how the relay's limits
are shared between the node and its email process, so that together they keep them."""

from __future__ import annotations

import pytest

from tidings.email.deliverability import parse_domain_rates
from tidings.email_process import sends_apart, split
from tidings.errors import ValidationError
from tidings.settings import Settings

RELAY = "smtp://127.0.0.1:2525"
FILE = "sqlite:///tmp-unused/tidings.db"


def settings(**values: object) -> Settings:
    return Settings(**{"db": FILE, "smtp_url": RELAY, **values})  # type: ignore[arg-type]


@pytest.mark.parametrize(("values", "cores", "apart"), [
    ({}, 2, True),                                   # auto: a file, two cores, 4 sessions
    ({}, 1, False),                                  # one core: nothing to gain
    ({"smtp_max_connections": 1}, 8, False),         # one session cannot be shared
    ({"db": "sqlite:///:memory:"}, 8, False),        # no other process can open it
    ({"db": "postgresql://u@db/app"}, 2, True),
    ({"smtp_url": None}, 8, False),                  # no relay: this node sends no email
    ({"email_sender": "inline"}, 8, False),
    ({"email_sender": "process"}, 1, True),          # asked for: one core or not
])
def test_auto_sends_from_a_second_process_where_it_can_help(
        values: dict[str, object], cores: int, apart: bool) -> None:
    assert sends_apart(settings(**values), available=cores) is apart


@pytest.mark.parametrize(("values", "rule"), [
    ({"db": "sqlite:///:memory:"}, "in-memory database"),
    ({"smtp_max_connections": 1}, "TIDINGS_SMTP_MAX_CONNECTIONS of at least 2"),
])
def test_a_process_that_cannot_work_is_refused_naming_the_setting(
        values: dict[str, object], rule: str) -> None:
    with pytest.raises(ValidationError) as err:
        sends_apart(settings(email_sender="process", **values))
    assert err.value.field == "TIDINGS_EMAIL_SENDER" and rule in err.value.message


def test_the_relay_limits_are_split_so_together_they_hold() -> None:
    whole = settings(smtp_max_connections=5, smtp_max_rate=200.0,
                     smtp_domain_rates="gmail.com=20,*=5")
    node, child = split(whole)
    assert node.smtp_max_connections + child.smtp_max_connections == 5
    assert (node.smtp_max_connections, child.smtp_max_connections) == (3, 2)
    assert node.smtp_max_rate + child.smtp_max_rate == 200.0
    for share in (node, child):
        assert parse_domain_rates(share.smtp_domain_rates) == {"gmail.com": 10.0, "*": 2.5}
        assert share.smtp_url == RELAY and share.db == FILE  # the rest as it was


def test_no_rate_stays_no_rate() -> None:
    node, child = split(settings())
    assert node.smtp_max_rate == child.smtp_max_rate == 0.0
    assert node.smtp_domain_rates is None and child.smtp_domain_rates is None
