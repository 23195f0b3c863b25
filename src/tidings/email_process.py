"""Email sent from a process of its own as well as the node (`TIDINGS_EMAIL_SENDER`).

Why: rendering, MIME and the SMTP conversation of each email are Python work, a few
tenths of a millisecond each; one process sends on one core at a time (the GIL), and on a
2-core machine the node reached ~2,800 emails a second on SQLite while the other core sat
mostly idle once the dispatcher had fired (bench/email.py). A child process
(`child_process.py`: the pipe, restarts, metrics and readiness) consumes the email queue
beside the node's own email consumer, so the two share the queue, each taking what it has
room for, and together use both cores.

What is split, so the node's settings still hold for the node as a whole:
- the relay's connections (`TIDINGS_SMTP_MAX_CONNECTIONS`): the node keeps the larger
  half, the child the rest, so the relay never sees more sessions than configured;
- the relay's rate (`TIDINGS_SMTP_MAX_RATE`) and each recipient domain's rate
  (`TIDINGS_SMTP_DOMAIN_RATES`): halved, so the two together never go faster (when one
  has less mail than the other, the total is below the rate, never above).
What is not split, because the database already holds it for every process and node:
warm-up caps, the daily cap per recipient, suppression and topic opt-outs, the delivery
log, and pauses (a relay's "slow down" for a domain pauses `email-domain:<domain>` in the
store, which both processes' limit books read).
Each process keeps its own relay sessions and its own view of whether the relay is up, so
a relay outage is logged once by each (with `[email process]` on the child's lines).

A job the child held when it died (killed -9) is received again once its lease runs out,
by either process; its delivery log row says whether the mail went already
(`targets/email.py`), so it is not sent twice.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Awaitable, Callable

from tidings.child_process import (
    Child,
    ChildProcess,
    Role,
    run_child,
)
from tidings.email.deliverability import parse_domain_rates
from tidings.errors import ValidationError
from tidings.notify.base import Notifier
from tidings.runtime import metrics
from tidings.runtime.health import Health
from tidings.runtime.service import Service
from tidings.settings import Settings, variable

ROLE = Role("tidings.email_process", "email sender", metrics.EMAIL_PROCESS_STARTS)


def cores() -> int:
    """The cores this process may run on (a container's CPU set, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def sends_apart(settings: Settings, *, available: int | None = None) -> bool:
    """Whether this node sends email from a child process too (`settings.email_sender`).
    Only a node with a relay sends email; `auto` chooses a child on a machine with two or
    more cores (`available`, default: this machine's), a database another process can
    open, and at least two relay connections to share."""
    if not settings.smtp_url:
        return False
    memory = settings.db.startswith("sqlite:") and settings.db.rstrip("/").endswith(":memory:")
    if settings.email_sender == "process":
        if memory:
            raise ValidationError(variable("email_sender"), "cannot be process with an "
                                  "in-memory database (another process cannot open it)")
        if settings.smtp_max_connections < 2:
            raise ValidationError(variable("email_sender"), "process needs "
                                  f"{variable('smtp_max_connections')} of at least 2 (the "
                                  "node and its email process each keep one)")
        return True
    if settings.email_sender == "auto":
        cpus = cores() if available is None else available
        return not memory and cpus >= 2 and settings.smtp_max_connections >= 2
    return False


def split(settings: Settings) -> tuple[Settings, Settings]:
    """The node's share and the email process's share of the relay's connections and
    rates (see the module's docstring)."""
    connections = settings.smtp_max_connections
    rates = parse_domain_rates(settings.smtp_domain_rates)
    halved = ",".join(f"{domain}={rate / 2:g}" for domain, rate in rates.items()) or None
    common = {"smtp_max_rate": settings.smtp_max_rate / 2, "smtp_domain_rates": halved}
    return (dataclasses.replace(settings, smtp_max_connections=connections - connections // 2,
                                **common),  # type: ignore[arg-type]
            dataclasses.replace(settings, smtp_max_connections=connections // 2,
                                **common))  # type: ignore[arg-type]


class EmailProcess(ChildProcess):
    """A service of the node (run/stop): keeps one email sender process running with
    `settings`, its share (`split`)."""

    def __init__(self, settings: Settings, notifier: Notifier, *,
                 health: Health | None = None) -> None:
        super().__init__(ROLE, settings, notifier, health=health)


def _build(child: Child) -> tuple[list[Service], Callable[[], Awaitable[None]]]:
    from tidings.jobs.deliveries import Targets, delivery_consumer
    from tidings.limits.book import LimitBook
    from tidings.queues.internal import EMAIL_QUEUE
    from tidings.targets.email import EmailDelivery

    t, settings, bridge = child.t, child.t.settings, child.bridge
    book = LimitBook(t.store, t.clock, bridge, t.notifier, fallback_s=settings.poll_fallback_s)
    targets = Targets(t.queues, bridge, {}, t.webhook_secret(),
                      email=EmailDelivery(t.email, bridge, settings),
                      webhook_guard=t.schedules.webhook_guard)
    # Each delivery's end wakes the metrics report (the node's counters follow within
    # METRICS_EVERY_S); an idle child wakes for nothing.
    consumer = delivery_consumer(targets, t.queues, t.clock, bridge, t.firing_log,
                                 queue=EMAIL_QUEUE, concurrency=settings.concurrency,
                                 grace_s=settings.shutdown_grace_s,
                                 poll_fallback_s=settings.poll_fallback_s,
                                 health=child.health, book=book, ended=child.moved_on_loop)
    return [book, consumer], targets.close


def main() -> None:
    """The child: `python -m tidings.email_process`, started by `EmailProcess`."""
    run_child(_build, "email process")


if __name__ == "__main__":
    main()
