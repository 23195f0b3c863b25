"""What a child process tells its node over the pipe (tidings/child_process.py): a
failing delivery reaches the node's recent failures (the console's failing targets),
its counts the node's metrics, its troubles the node's readiness."""

from __future__ import annotations

import asyncio
import io
import json

from tidings.child_process import ChildProcess, Role, Wire, forward_failures
from tidings.notify.local import LocalNotifier
from tidings.runtime import metrics
from tidings.runtime.health import Health
from tidings.settings import Settings

ROLE = Role("tidings.email_process", "email sender", metrics.EMAIL_PROCESS_STARTS)


def test_a_childs_failures_counts_and_troubles_reach_the_node() -> None:
    out = io.BytesIO()
    wire = Wire(out, on_broken=lambda: None)
    forward_failures(wire)
    try:
        metrics.FAILURES.add(1_000, "email", "", "SMTP451: try later")
    finally:
        metrics.FAILURES.listener = None
    wire.send("m " + json.dumps({"counters": [["tidings_deliveries", {"target": "email"},
                                               3.0]]}))
    wire.send("h " + json.dumps({"consumer of tidings-email": "database is locked"}))
    health = Health(export=False)
    node_side = ChildProcess(ROLE, Settings(), LocalNotifier(), health=health)
    before = metrics.REGISTRY.get_sample_value("tidings_deliveries_total",
                                               {"target": "email"}) or 0.0

    async def read() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(out.getvalue())
        reader.feed_eof()
        await node_side._read(reader)

    asyncio.run(read())
    assert ("email", "", "SMTP451: try later") in [f[1:] for f in metrics.FAILURES.since(1_000)]
    assert metrics.REGISTRY.get_sample_value("tidings_deliveries_total",
                                             {"target": "email"}) == before + 3.0
    assert health.troubles()["email sender"].reason == "database is locked"
