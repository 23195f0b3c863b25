"""`GET /health/ready`: whether this node can do its work now, for a load balancer's or
an orchestrator's readiness probe (`GET /health` only says that the process answers).

Two things are looked at: the database answers a read within `TIMEOUT_S` (asked now,
through the node's own store threads, so a node whose every store thread is stuck is
not ready either), and what the node's loops last met (`runtime/health.py`): a loop
backing off because the disk is full, the dispatcher process starting or restarting. The
answer is 200 when every check is ok, else 503.

The route is open (a probe seldom carries a token), but a reason can name a file path or
a database host, and a consumer's its queue: reasons, instants and the names of the other
components go only to a caller whose token may read, or to anyone where the node needs no
token (a development node: loopback, no credentials); others see whether the database,
the dispatcher or some other part fails.
"""

from __future__ import annotations

import asyncio

from tidings.client import Tidings
from tidings.clock import iso
from tidings.errors import TidingsError
from tidings.runtime.bridge import Bridge
from tidings.runtime.health import Health
from tidings.server.access import Access, Scope
from tidings.server.native.models import CheckOut, ReadinessOut

TIMEOUT_S = 2.0


async def database_check(t: Tidings, bridge: Bridge) -> CheckOut:
    try:
        await asyncio.wait_for(bridge.run(t.store.ping), TIMEOUT_S)
    except TimeoutError:
        return CheckOut(ok=False, reason=f"no answer within {TIMEOUT_S:g} s")
    except Exception as exc:  # noqa: BLE001 - whatever it is, it is the reason given
        return CheckOut(ok=False, reason=str(exc) or type(exc).__name__)
    return CheckOut(ok=True)


def may_see_details(access: Access, authorization: str | None) -> bool:
    if not access.required:
        return True
    if not authorization:
        return False
    try:
        access.authorise(authorization, Scope.READ)
    except TidingsError:  # Unauthorized, Forbidden: the answer without its reasons
        return False
    return True


async def readiness(t: Tidings, bridge: Bridge, db: str, health: Health | None, *,
                    details: bool = True) -> tuple[int, ReadinessOut]:
    """(HTTP status, body). `health` is the node's (None for an app without engine loops:
    then only the database is checked)."""
    checks = {"database": await database_check(t, bridge)}
    if health is not None:
        troubles = health.troubles()
        checks["dispatcher"] = CheckOut(ok=True)  # replaced below when it is failing
        for name, trouble in sorted(troubles.items()):
            checks[name] = CheckOut(ok=False, reason=trouble.reason,
                                    since=iso(trouble.since_ms))
    ready = all(check.ok for check in checks.values())
    if not details:  # nor a queue's name: the other components are one check
        hidden: dict[str, CheckOut] = {
            name: CheckOut(ok=checks[name].ok) for name in ("database", "dispatcher")
            if name in checks}
        if len(hidden) < len(checks):
            hidden["other"] = CheckOut(ok=False)
        checks = hidden
    return (200 if ready else 503), ReadinessOut(
        status="ready" if ready else "unavailable", db=db, checks=checks)
