"""Many email schedules due at once, through a node, into a real aiosmtpd relay offering
CHUNKING: the relay pool carries them many to a write (BDAT), and every delivery of the
batch still gets its own outcome in the delivery log, whatever its neighbours'."""

from __future__ import annotations

import json
import time
from typing import Any

from email_relay import Relay, running_relay
from serving import run_until

from tidings.client import Tidings
from tidings.model.email import DeliveryState
from tidings.model.schedules import RetryPolicy, ScheduleSpec, Target, TargetKind
from tidings.node import Node
from tidings.settings import Settings

SENT, N = DeliveryState.SENT, 50


def spec(name: str, to: str, data: dict[str, Any], **target: Any) -> ScheduleSpec:
    doc = {"FromEmailAddress": "News <news@example.com>",
           "Destination": {"ToAddresses": [to]},
           "Content": {"Template": {"TemplateName": "hello",
                                    "TemplateData": json.dumps(data)}}}
    return ScheduleSpec(name, time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime()),
                        Target(TargetKind.EMAIL, "", input=json.dumps(doc), **target))


def test_a_chunked_batch_records_every_outcome_of_its_deliveries(db_url: str) -> None:
    relay = Relay(pipelining=True, chunking=True,
                  refuse_rcpt={"gone@example.org": "550 5.1.1 no such user",
                               "full@example.org": "452 4.2.2 mailbox full"})
    with Tidings(settings=Settings(db=db_url, public_url="https://mail.example.test")) as t:
        t.email.create_template("hello", "Hello {{name}}", text="Hi {{name}}, {{n}}")
        assert t.email.suppress("quiet@example.org", "MANUAL")
        once = RetryPolicy(maximum_retry_attempts=0)
        specs = [spec(f"u{n}", f"u{n}@example.org", {"name": f"U{n}", "n": n})
                 for n in range(N)]
        specs += [spec("quiet", "quiet@example.org", {"name": "Q", "n": 0}),
                  spec("gone", "gone@example.org", {"name": "G", "n": 0}),
                  spec("full", "full@example.org", {"name": "F", "n": 0}, retry_policy=once),
                  spec("nodata", "nodata@example.org", {"name": "X"})]
        for made in t.schedules.create_many(specs):
            assert made.error is None
        wanted = {f"u{n}@example.org": SENT for n in range(N)} | {
            "quiet@example.org": DeliveryState.SUPPRESSED,
            "gone@example.org": DeliveryState.BOUNCED,
            "full@example.org": DeliveryState.FAILED,
            "nodata@example.org": DeliveryState.RENDERING_FAILURE}

        def outcomes() -> dict[str, DeliveryState]:
            return {d.recipients[0]: d.state for d in t.email.log(limit=200)[0]}

        with running_relay(relay) as url:
            node = Node(t, Settings(db=db_url, smtp_url=url, concurrency=64,
                                    shutdown_grace_s=2))
            run_until(node, lambda: outcomes() == wanted, timeout=30)
        assert outcomes() == wanted
        log = {d.recipients[0]: d for d in t.email.log(limit=200)[0]}
        assert "452" in (log["full@example.org"].detail or "")
        assert "550" in (log["gone@example.org"].detail or "")
        assert log["nodata@example.org"].detail  # the path the data lacks
    got = sorted(r.rcpt_tos[0] for r in relay.received)
    assert got == sorted(f"u{n}@example.org" for n in range(N))  # each once
    assert relay.bdat_messages == N  # every message went in BDAT chunks
