"""A node beyond loopback that delivers email refuses to start without an https
TIDINGS_PUBLIC_URL (its unsubscribe links), or warns once, loudly, when told to go on."""

from __future__ import annotations

import logging

import pytest

from tidings.errors import ValidationError
from tidings.server.exposure import check_unsubscribe_links
from tidings.settings import Settings

RELAY = "smtp://relay.example.com:587"


@pytest.mark.parametrize("public_url", [None, "http://mail.example.com"])
def test_beyond_loopback_email_needs_an_https_public_url(public_url: str | None) -> None:
    settings = Settings(host="0.0.0.0", smtp_url=RELAY, public_url=public_url,
                        api_tokens="admin:" + "a" * 32)
    with pytest.raises(ValidationError) as err:
        check_unsubscribe_links(settings)
    assert err.value.field == "TIDINGS_PUBLIC_URL"
    assert "https" in err.value.message and "TIDINGS_INSECURE_UNSUBSCRIBE_LINKS" in \
        err.value.message


def test_what_may_start(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tidings.security")
    for fine in (Settings(host="127.0.0.1", smtp_url=RELAY),  # a development node
                 Settings(host="0.0.0.0"),  # no relay: it delivers no email
                 Settings(host="0.0.0.0", smtp_url=RELAY,
                          public_url="https://mail.example.com")):
        check_unsubscribe_links(fine)
    assert caplog.records == []
    check_unsubscribe_links(Settings(host="0.0.0.0", smtp_url=RELAY,
                                     insecure_unsubscribe_links=True))
    [warning] = caplog.records
    assert warning.levelno == logging.WARNING and "!!!" in warning.getMessage()
    assert "TIDINGS_PUBLIC_URL is not set" in warning.getMessage()
