"""The open-node reminder repeats; the exposure rule is Redis's protected mode."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tidings.errors import ValidationError
from tidings.server.exposure import (
    OpenNodeWarning,
    check_exposure,
    describe,
    uvicorn_security,
)
from tidings.settings import Settings


def test_the_open_node_warning_repeats(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "tidings.security")

    async def main() -> None:
        warning = OpenNodeWarning("0.0.0.0", interval_s=0.05)
        task = asyncio.create_task(warning.run())
        await asyncio.sleep(0.18)
        warning.stop()
        await task

    asyncio.run(main())
    assert 3 <= sum("authentication off" in r.getMessage() for r in caplog.records) <= 5


def test_exposure_needs_credentials_beyond_loopback() -> None:
    check_exposure(Settings())
    check_exposure(Settings(host="::1"))
    with pytest.raises(ValidationError, match="TIDINGS_API_TOKENS"):
        check_exposure(Settings(host="0.0.0.0"))
    check_exposure(Settings(host="0.0.0.0", api_tokens="admin:" + "a" * 20))
    check_exposure(Settings(host="10.1.2.3", aws_keys="AKID:secret"))
    check_exposure(Settings(host="0.0.0.0", insecure_no_auth=True))


def test_forwarded_headers_only_from_trusted_proxies() -> None:
    assert uvicorn_security(Settings())["proxy_headers"] is False
    opts = uvicorn_security(Settings(trusted_proxies="10.0.0.5"))
    assert opts["proxy_headers"] is True and opts["forwarded_allow_ips"] == "10.0.0.5"
    with pytest.raises(ValidationError, match="tls"):
        uvicorn_security(Settings(tls_cert="cert.pem"))


def test_any_credential_closes_every_api_on_loopback_too() -> None:
    tokens, keys = "admin:" + "a" * 20, "AKID:secret"
    assert not Settings().credentials_required  # a development node
    assert Settings(api_tokens=tokens).credentials_required
    assert Settings(aws_keys=keys).credentials_required
    assert not Settings(host="0.0.0.0", insecure_no_auth=True).credentials_required
    assert Settings(host="0.0.0.0", insecure_no_auth=True, aws_keys=keys).credentials_required
    assert describe(Settings(api_tokens=tokens)) == [
        "native API and console: bearer tokens required",
        "AWS APIs: SigV4 required (no keys configured: every call is refused)"]
    assert describe(Settings(host="0.0.0.0", insecure_no_auth=True)) == [
        "authentication OFF (--insecure-no-auth)"]
