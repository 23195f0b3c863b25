"""`tidings backup DEST` and `tidings restore SRC` (docs/operations.md).

Same conventions as the other commands: `--db`, `--json`, exit codes 0 ok, 1 not found
or conflict (DEST exists, the database is in use) or failure (a damaged database, no
pg_dump), 2 invalid input (a SRC that is damaged or not a tidings backup). Progress goes
to stderr, and only to people: never with `--json`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from tidings.cli.options import DEFAULT_DB, DbOption, JsonOption
from tidings.cli.output import errors_handled, report, stderr
from tidings.cli.where import database_settings
from tidings.clock import Clock, SteppedClock, SystemClock, iso
from tidings.ops import backups
from tidings.settings import Settings
from tidings.store.backup import Progress as ProgressCallback

ForceOption = Annotated[bool, typer.Option("--force", help="Replace what is there.")]


def backup(
    dest: Annotated[str, typer.Argument(metavar="DEST", help="The backup file to write.",
                                        show_default=False)],
    db: DbOption = DEFAULT_DB,
    force: ForceOption = False,
    as_json: JsonOption = False,
) -> None:
    """Back up the database while nodes keep using it: one consistent instant, checked
    before it is kept. SQLite: the online backup API, then integrity_check; PostgreSQL:
    pg_dump (custom format) of tidings' schema. Never copy a live SQLite file with cp."""
    settings = database_settings(db)
    with errors_handled():
        with _progress("backup", as_json) as show:
            done = backups.backup(settings.db, dest, force=force, clock=_clock(settings),
                                  progress=show)
    rate = done.bytes / 1e6 / done.seconds if done.seconds else 0.0
    report(as_json, {
        "source": done.source, "backup": done.path, "bytes": done.bytes,
        "seconds": round(done.seconds, 3), "snapshot_at": iso(done.snapshot_at),
        "schema_version": done.schema_version, "method": done.method,
        "checked": done.checked,
    }, f"backed up {done.source} to {done.path}: {done.bytes / 1e6:,.1f} MB in "
       f"{done.seconds:.1f} s ({rate:,.0f} MB/s), {done.checked}; it holds every write "
       f"acknowledged before {iso(done.snapshot_at)} (schema {done.schema_version})")


def restore(
    source: Annotated[str, typer.Argument(metavar="SRC", help="The backup file to restore.",
                                          show_default=False)],
    db: DbOption = DEFAULT_DB,
    force: ForceOption = False,
    as_json: JsonOption = False,
) -> None:
    """Replace the database (--db) with a backup, checked whole first; all of it or
    nothing. Stop every node first: a database in use is refused, and one that is
    there needs --force. See docs/operations.md for what a restore brings back."""
    settings = database_settings(db)
    with errors_handled():
        with _progress("restore", as_json) as show:
            done = backups.restore(settings.db, source, force=force, clock=_clock(settings),
                                   progress=show)
    report(as_json, {
        "source": done.source, "target": done.target, "bytes": done.bytes,
        "seconds": round(done.seconds, 3), "schema_version": done.schema_version,
        "replaced": done.replaced, "method": done.method, "checked": done.checked,
    }, f"restored {done.source} into {done.target}"
       f"{' (the database that was there is gone)' if done.replaced else ''} in "
       f"{done.seconds:.1f} s, {done.checked} (schema {done.schema_version}); nodes "
       "started on it bring its schema up to date")


def _clock(settings: Settings) -> Clock:
    """The nodes' clock (a test's stepped one too): heartbeats are compared with it."""
    if settings.clock_offset_file:
        return SteppedClock(settings.clock_offset_file)
    return SystemClock()


@contextmanager
def _progress(what: str, as_json: bool) -> Iterator[ProgressCallback]:
    with Progress(TextColumn(f"[bold]{what}"), BarColumn(), TaskProgressColumn(),
                  DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                  console=stderr, transient=True, disable=as_json) as bar:
        task = bar.add_task(what, total=None)

        def show(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield show


__all__ = ["backup", "restore"]
