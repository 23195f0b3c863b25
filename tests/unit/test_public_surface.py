"""What `t.queues`, `t.schedules`, `t.email` and `t.campaigns` show a user is what a user
calls: the engine's own steps (maintenance, leases, sends to tidings' own queues) are public
on the small object the engine holds (`t.queues.ops`), not on the services. (The email
target's batch read and write, `prepare_many` / `record_many`, are `EmailService`'s.)"""

from __future__ import annotations

import inspect

from tidings.campaigns.service import CampaignService
from tidings.email.service import EmailService
from tidings.queues.service import QueueService
from tidings.schedules.service import ScheduleService

INTERNAL = {"sweep", "advance_move_tasks", "complete_job", "complete_jobs",
            "lease", "receive_step", "ensure_internal", "enqueue_internal"}


def public(cls: type) -> set[str]:
    return {n for n, _ in inspect.getmembers(cls, callable) if not n.startswith("_")}


def test_services_keep_internal_steps_private() -> None:
    for service in (QueueService, ScheduleService, EmailService, CampaignService):
        assert public(service) & INTERNAL == set(), service.__name__


def test_the_check_sees_a_public_method() -> None:
    class Leaky:
        def sweep(self) -> None: ...

    assert public(Leaky) & INTERNAL == {"sweep"}
