"""The SSRF guard's decisions, with a resolver that answers what the test needs."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from tidings.errors import ValidationError
from tidings.settings import Settings
from tidings.targets.base import DeliveryError
from tidings.targets.guard import Plan, WebhookGuard


def guard(answers: dict[str, list[str]], **kw: object) -> WebhookGuard:
    async def resolve(host: str, port: int) -> list[str]:
        return answers[host]

    return WebhookGuard(enabled=True, resolve=resolve, **kw)  # type: ignore[arg-type]


def plan(g: WebhookGuard, url: str) -> Plan | None:
    return asyncio.run(g.plan(url))


def test_the_request_goes_to_the_checked_address_with_the_name_kept() -> None:
    p = plan(guard({"hooks.example.com": ["93.184.215.14"]}),
             "https://hooks.example.com:8443/a?b=1")
    assert p == Plan("https://93.184.215.14:8443/a?b=1", "hooks.example.com", 8443, True)


def test_a_name_with_any_inside_address_uses_only_a_public_one() -> None:
    g = guard({"mixed.example": ["10.0.0.1", "2606:4700::1111"]})
    p = plan(g, "http://mixed.example/x")
    assert p is not None and p.url == "http://[2606:4700::1111]:80/x"


@pytest.mark.parametrize("inside", ["127.0.0.1", "::1", "169.254.169.254", "192.168.1.1",
                                    "fd00::1", "100.64.1.1", "::ffff:10.0.0.1"])
def test_a_name_resolving_inside_is_refused_without_retry(inside: str) -> None:
    with pytest.raises(DeliveryError) as refused:
        plan(guard({"rebound.example": [inside]}), "http://rebound.example/x")
    assert refused.value.code == "WebhookRefused" and not refused.value.retryable
    assert str(ipaddress.ip_address(inside)) in refused.value.message


def test_allowed_names_and_ranges() -> None:
    g = guard({"hooks.internal": ["10.1.2.3"], "a.corp.internal": ["10.9.9.9"],
               "other": ["10.2.0.1"]}, allow=["hooks.internal", ".corp.internal",
                                              "10.2.0.0/16"])
    assert plan(g, "http://hooks.internal/") is not None
    assert plan(g, "http://a.corp.internal/") is not None
    assert plan(g, "http://other/") is not None
    g.check_url("http://10.2.3.4/")
    with pytest.raises(ValidationError):
        g.check_url("http://10.3.0.1/")


def test_the_guard_is_off_on_a_development_node_only() -> None:
    assert not WebhookGuard.from_settings(Settings()).enabled
    assert WebhookGuard.from_settings(Settings(api_tokens="admin:" + "a" * 20)).enabled
    assert WebhookGuard.from_settings(Settings(host="0.0.0.0")).enabled
    assert WebhookGuard.from_settings(Settings(webhook_guard="on")).enabled
    assert not WebhookGuard.from_settings(Settings(host="0.0.0.0",
                                                   webhook_guard="off")).enabled
