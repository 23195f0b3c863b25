"""A running node's watch on its database's schema, which a newer node may migrate.

In a rolling upgrade (docs/upgrading.md) the first node of the new release migrates the
database at its start, under the nodes still running the old one. A migration marked
additive leaves them working, and this guard says once that they should be upgraded. Any
other may have changed tables their SQL uses: the guard stops its node cleanly, with the
reason and the CLI's exit code 3, instead of leaving it to fail on the first statement
that no longer fits (and, under a supervisor that restarts it, to fire and fail again).

It looks at the migrations table every `CHECK_EVERY_S`: one statement (how many, the last
one) while that is what it was at the last full read, which runs only when it changed (an
idle PostgreSQL node spent a fifth of its reads on four statements a look). A loop that
fails in between on a changed table makes the node look here too before it calls that a
crash (node.py).
"""

from __future__ import annotations

import asyncio
import logging

from tidings.errors import StoreUnavailable
from tidings.runtime.bridge import Bridge
from tidings.store.base import StoreRuntime
from tidings.store.migrate import SchemaStatus

log = logging.getLogger("tidings.schema")

CHECK_EVERY_S = 5.0


class SchemaGuard:
    """A service (run/stop): `run` raises `SchemaTooNew` when the database was migrated
    by a newer release this node cannot run on."""

    def __init__(self, store: StoreRuntime, bridge: Bridge, *, interval_s: float = CHECK_EVERY_S,
                 warned_at_open: int = 0) -> None:
        """`warned_at_open`: the database's last migration when the node opened it (any
        additive newer ones were warned about then)."""
        self.store = store
        self.bridge = bridge
        self.interval_s = interval_s
        self._stopping = asyncio.Event()
        self._warned = warned_at_open  # the database's last migration already warned about
        self._mark: tuple[int, int] | None = None  # `schema_mark` at the last full read
        self._status: SchemaStatus | None = None  # what that read found

    async def check(self) -> SchemaStatus | None:
        """The database's schema now; raises `SchemaTooNew` when this node cannot run on
        it, None when the database does not answer (the other loops report that)."""
        try:
            mark = await self.bridge.run(self.store.schema_mark)
        except StoreUnavailable:
            return None
        except Exception:  # noqa: BLE001 - a damaged table: the full read says what it is
            mark = None
        if mark is not None and mark == self._mark and self._status is not None:
            status = self._status
        else:
            try:
                status = await self.bridge.run(self.store.schema_status)
            except StoreUnavailable:
                return None
            self._mark, self._status = mark, status
        if status.unknown:
            if not status.usable:
                raise status.too_new()
            if status.database != self._warned:
                self._warned = status.database
                log.warning("the database was migrated by a newer tidings: it has %s; this "
                            "is %s. The newer migrations are additive, so this node keeps "
                            "running; upgrade it (docs/upgrading.md)", status.newer(),
                            status.ours())
        return status

    async def run(self) -> None:
        while not self._stopping.is_set():
            await self.check()
            try:
                await asyncio.wait_for(self._stopping.wait(), self.interval_s)
            except TimeoutError:
                pass

    def stop(self) -> None:
        self._stopping.set()
