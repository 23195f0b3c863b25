"""Backups and restores as the faces offer them (`tidings backup`, `tidings restore`):
the store's tool for the database's backend (store/backup/), and the policy around it.

The policy: a restore replaces a database nothing uses. On SQLite the tool sees every
process that has the file open (its locks: exact, and a node killed with -9 lets go at
once); elsewhere a node counts as using the database while it is alive by its heartbeats
(`nodes.is_alive`: the console's rule, so a node that stopped cleanly does not count, and
one killed with -9 counts for `SILENT_AFTER_MS`). Either refusal names the nodes. A
backup never waits for nodes: taking one while they work is what it is for. Neither
migrates: a backup holds the schema version the database had (the one taken before an
upgrade, above all), and the node that next opens a restored database brings it up to
date.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tidings.clock import Clock
from tidings.errors import ConflictError, TidingsError
from tidings.model.nodes import NodeRecord
from tidings.ops.nodes import SILENT_AFTER_MS, is_alive
from tidings.store.backup import BackupReport, Progress, RestoreReport, backup_tool
from tidings.store.backup.base import BackupTool, InUse


def backup(url: str, dest: str, *, force: bool, clock: Clock,
           progress: Progress | None = None) -> BackupReport:
    """A consistent backup of the database at `url` into the file `dest`, while nodes
    keep using it; `force` replaces an existing `dest`."""
    with _file_errors("no backup was written"):
        return backup_tool(url, clock).backup(dest, replace=force, progress=progress)


def restore(url: str, source: str, *, force: bool, clock: Clock,
            progress: Progress | None = None) -> RestoreReport:
    """Replace the database at `url` with the backup `source`, checked whole first;
    `force` is needed when a database is there. Refused while it is in use."""
    tool = backup_tool(url, clock)
    if not tool.sees_users:
        alive = _alive(tool, clock)
        if alive:
            raise ConflictError(f"{tool.name} is in use ({_named(alive, clock)}): stop "
                                "every node, then restore")
    try:
        with _file_errors("nothing was restored"):
            return tool.restore(source, replace=force, progress=progress)
    except InUse as exc:
        alive = _alive(tool, clock)
        who = _named(alive, clock) if alive else (
            "a node, a worker, a CLI command or your application")
        raise InUse(f"{exc.message} ({who}): stop it, then restore") from None


@contextmanager
def _file_errors(outcome: str) -> Iterator[None]:
    """A file that cannot be read or written (no space, no permission) is the operator's
    to fix: a message naming it, not a traceback. The tools clean up after themselves."""
    try:
        yield
    except OSError as exc:
        raise TidingsError(f"{exc.strerror or exc}: {exc.filename!r}; {outcome}") from exc


def _alive(tool: BackupTool, clock: Clock) -> list[NodeRecord]:
    now = clock.now_ms()
    return [n for n in tool.nodes(now - SILENT_AFTER_MS) if is_alive(n, now)]


def _named(nodes: list[NodeRecord], clock: Clock) -> str:
    """'node on web-1 (pid 41), seen 2 s ago' for each node."""
    now = clock.now_ms()
    return ", ".join(f"node on {n.host} (pid {n.pid}), seen "
                     f"{max(now - n.seen_at, 0) / 1000:.0f} s ago" for n in nodes)
