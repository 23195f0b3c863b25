"""Where a command acts: the remote node `--url` (or TIDINGS_URL) names, or a database.

The rule, decided here and nowhere else: with a URL set, a command goes to that node, or
fails saying why; it never opens, let alone creates, a database of its own. A wrong
answer read from a `./tidings.db` that happened to be in the working folder is far worse
than an error. So every command that opens a database does it through `tidings()` (or
takes its settings from `database_settings()`, for `serve`, `migrate`, `backup` …), which
refuse while TIDINGS_URL is set; a command that can work both ways decides through
`on_node_or_db`, which never falls through to the database once it has a URL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from tidings.cli.output import EXIT_USAGE, errors_handled, fail
from tidings.client import Tidings
from tidings.remote import RemoteTidings
from tidings.settings import Settings
from tidings.store import Create

T = TypeVar("T")


def node_url(url: str | None) -> str | None:
    """The remote node of this command: `--url`, else TIDINGS_URL, else None."""
    if url:
        return url
    with errors_handled():
        return Settings.from_env().url or None


def database_settings(db: str | None, **overrides: Any) -> Settings:
    """The settings of a command that works on a database (`db` None: TIDINGS_DB or the
    default), refused while TIDINGS_URL names a remote node."""
    with errors_handled():
        settings = Settings.from_env(db=db, **overrides)
    if settings.url:
        raise fail(f"TIDINGS_URL names a remote node ({settings.url}), and this command "
                   "works on a database: unset TIDINGS_URL to use one here (a command "
                   "never answers from a local database while a node is named)", EXIT_USAGE)
    return settings


@contextmanager
def tidings(db: str | None, *, create: Create = Create.NOTHING) -> Iterator[Tidings]:
    """Open the database for one command; a tidings error becomes a message and an exit
    code instead of a traceback. `db` None: the settings' (TIDINGS_DB or the default).

    Every command opens the database here, and by default opens what exists, as it is: a
    missing database is an error naming its path, never a new empty one, and one older
    than this release is not migrated. Commands that put the first things in a database
    pass `Create.DATABASE` (or `FOLDERS`, their `--create`). Refused while TIDINGS_URL is
    set (`database_settings`)."""
    settings = database_settings(db)
    with errors_handled(), Tidings(settings=settings, create=create) as t:
        yield t


@contextmanager
def remote(url: str | None) -> Iterator[RemoteTidings]:
    """The node `--url` or TIDINGS_URL names (with TIDINGS_TOKEN); a refusal or a
    connection failure becomes a message and an exit code."""
    with errors_handled(), RemoteTidings(url) as node:
        yield node


def on_node_or_db(url: str | None, db: str | None, on_node: Callable[[RemoteTidings], T],
                  on_db: Callable[[Tidings], T], *, create: Create = Create.NOTHING) -> T:
    """A command that works both ways: through the native API of the node `--url` (or
    TIDINGS_URL) names, else on the database itself (opened with `create`); both answer
    the same documents. A database flag beside a URL is refused, not ignored: the command
    cannot do both."""
    where = node_url(url)
    if where is None:
        with tidings(db, create=create) as t:
            return on_db(t)
    if db is not None:
        raise fail(f"--db: the command goes to the remote node {where} (--url or "
                   "TIDINGS_URL); give one or the other", EXIT_USAGE)
    if create is Create.FOLDERS:
        raise fail(f"--create: the command goes to the remote node {where}, which makes "
                   "its own database", EXIT_USAGE)
    with remote(where) as node:
        return on_node(node)
