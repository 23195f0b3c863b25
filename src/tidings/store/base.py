"""The store contract: the one `Protocol` every backend satisfies (through `SqlStore`).

Methods are named after the transitions they perform and take `now` from the caller (the
engine's injected clock); the store never reads the wall clock. The contract is
synchronous: SQLite's driver is, psycopg 3 offers it too, and one flavour avoids twin
methods. The async server bridges with a small thread pool sized by `max_concurrency`
(1 for SQLite, which has one writer anyway).

Invariants every backend keeps (`tests/conformance` checks them on both):
- every write that depends on a state is a compare-and-set: a message's on its lease
  (`visible_at`, `lease_token`), a firing's on the schedule's `version` as its firing
  pass read it (every write to a schedule adds one to its version), a stored status
  on the status it was read with (`tidings.model.states`), so a stale receipt, a lost
  claim or a lost race never changes what someone else now holds;
- a multi-row call is one transaction: all of it happens or none of it;
- instants are integer UTC epoch milliseconds.
"""

from __future__ import annotations

from typing import Protocol

from tidings.store.contract.campaigns import CampaignStore
from tidings.store.contract.contacts import ContactStore
from tidings.store.contract.email import DeliveryQuery, EmailStore
from tidings.store.contract.limits import LimitStore
from tidings.store.contract.nodes import NodeStore
from tidings.store.contract.push import NewSubscription, PushStore, SlotClaim
from tidings.store.contract.queues import (
    JobAck,
    JobLease,
    QueueStore,
    ReceiveOutcome,
    ReceiveParams,
    Rejection,
    Reservation,
    StoredSend,
    VisibilityChange,
)
from tidings.store.contract.runtime import StoreRuntime
from tidings.store.contract.schedules import (
    Firing,
    FiringOutcome,
    FiringPass,
    NewSchedule,
    ScheduleStore,
    TargetMessage,
)
from tidings.store.contract.security import SecurityStore

__all__ = [
    "CampaignStore", "ContactStore", "DeliveryQuery", "EmailStore", "Firing", "FiringOutcome",
    "FiringPass", "JobAck", "JobLease", "LimitStore", "NewSchedule", "NewSubscription",
    "NodeStore", "PushStore", "QueueStore", "ReceiveOutcome", "ReceiveParams", "Rejection",
    "Reservation", "ScheduleStore", "SecurityStore", "SlotClaim", "Store", "StoreRuntime",
    "StoredSend", "TargetMessage", "VisibilityChange",
]


class Store(StoreRuntime, QueueStore, ScheduleStore, EmailStore, ContactStore, CampaignStore,
            NodeStore, SecurityStore, LimitStore, PushStore, Protocol):
    """Everything a backend stores: the one contract `open_store` returns. Each part lives
    in `tidings.store.contract`, named after what it stores; `StoreRuntime` is how it
    runs."""
