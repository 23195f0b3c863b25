"""What runs a store rather than what it stores: where it is, how it is reached from the
async server (`runtime.bridge.Bridge.for_store` sizes its threads by `max_concurrency` and
runs short calls inline under `inline_lock`), whether it answers, and closing it."""

from __future__ import annotations

from typing import Protocol

from tidings.store.driver import ConnectionLock
from tidings.store.migrate import SchemaStatus


class StoreRuntime(Protocol):
    url: str
    #: How many store calls may usefully run at once (1 for SQLite: one writer).
    max_concurrency: int
    #: `Driver.inline_lock`: set where one connection serves every call (SQLite).
    inline_lock: ConnectionLock | None

    def close(self) -> None: ...

    def ping(self) -> None:
        """A read that touches no table: raises StoreUnavailable if the database does not
        answer (the readiness probe)."""
        ...

    def schema_status(self) -> SchemaStatus:
        """The database's migrations against this release's, read now (a running node
        looks for a newer node having migrated it: `ops/schema_guard.py`)."""
        ...

    def schema_mark(self) -> tuple[int, int]:
        """(how many migrations, the last one) in the database, in one statement: what
        the schema guard reads between full looks, as long as it has not changed."""
        ...
