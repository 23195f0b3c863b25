"""The limit key of an email delivery job: its first recipient's domain."""

from __future__ import annotations

import json

from tidings.targets.email_target import email_domain


def test_email_domain_is_the_first_recipients_whatever_the_documents_shape() -> None:
    def job(doc: object, kind: str = "email") -> dict[str, object]:
        return {"target": {"kind": kind}, "input": doc if isinstance(doc, str)
                else json.dumps(doc)}

    plain = {"Destination": {"ToAddresses": ["Ann@Gmail.COM", "b@x.org"]}}
    assert email_domain(job(plain)) == "gmail.com"
    shown = {"Destination": {"ToAddresses": ['"Ann \\"A\\"" <ann@yahoo.com>']}}
    assert email_domain(job(shown)) == "yahoo.com"  # escapes: parsed instead
    assert email_domain(job({"Destination": {"BccAddresses": ["c@bcc.example"]}})) == \
        "bcc.example"
    assert email_domain(job(plain, kind="webhook")) is None
    assert email_domain(job("not json")) is None
    assert email_domain(job({"Destination": {}})) is None
