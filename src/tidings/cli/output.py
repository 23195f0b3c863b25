"""How CLI commands print and fail (where they act, a node or a database: `cli/where.py`).

Output contract: with `--json`, exactly one JSON document on stdout; otherwise rich tables
for people. Errors always go to stderr as `error: <field>: <rule>` (or `error: <message>`).
Exit codes: 0 ok, 1 not found / conflict / runtime failure, 2 bad usage or invalid value
(the same code click uses for usage errors, so scripts can tell "fix your command" apart),
3 the database was migrated by a newer tidings than this one (refused at start, or a
running node stopped: upgrade this one; docs/upgrading.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tidings.errors import BatchError, SchemaTooNew, TidingsError, ValidationError
from tidings.remote import RemoteError

T = TypeVar("T")

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_SCHEMA_TOO_NEW = 0, 1, 2, 3

stdout = Console(soft_wrap=False, highlight=False)
stderr = Console(stderr=True, soft_wrap=True, highlight=False)


def fail(message: str, code: int) -> typer.Exit:
    # markup=False: messages quote user input, which may contain [brackets]
    stderr.print(f"error: {message}", markup=False, highlight=False)
    return typer.Exit(code)


def instant_option(name: str, text: str | None) -> datetime | None:
    """An ISO 8601 instant given on the command line (`2026-12-01T09:00:03.250Z`); one
    without an offset is ambiguous, so refused with exit code 2."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise fail(f"--{name}: {text!r} is not an ISO 8601 instant", EXIT_USAGE) from None
    if when.utcoffset() is None:
        raise fail(f"--{name}: {text!r} needs a UTC offset (e.g. Z or +01:00)", EXIT_USAGE)
    return when


def exit_code(exc: TidingsError) -> int:
    if isinstance(exc, SchemaTooNew):
        return EXIT_SCHEMA_TOO_NEW
    if isinstance(exc, RemoteError):  # the node's verdict: the same codes as at home
        return EXIT_USAGE if exc.code == "InvalidParameterValue" else EXIT_FAILURE
    return EXIT_USAGE if isinstance(exc, ValidationError | BatchError) else EXIT_FAILURE


@contextmanager
def errors_handled() -> Iterator[None]:
    """A tidings error becomes a message and an exit code instead of a traceback."""
    try:
        yield
    except TidingsError as exc:
        raise fail(exc.message, exit_code(exc)) from None


def all_pages(fetch: Callable[[str | None], tuple[Sequence[T], str | None]]) -> Iterator[T]:
    """Every item of a paged listing: `fetch(next_token)` returns a page and the next token."""
    token: str | None = None
    while True:
        page, token = fetch(token)
        yield from page
        if token is None:
            return


def emit_json(doc: Any) -> None:
    print(json.dumps(doc, indent=2, ensure_ascii=False))


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    t = Table(title=title, title_justify="left")
    for col in columns:
        t.add_column(col, overflow="fold")
    for row in rows:
        # Text(), not str: a body like "[bold]" must print as written, not as markup.
        t.add_row(*(Text("" if v is None else str(v)) for v in row))
    stdout.print(t)


def line(text: str) -> None:
    stdout.print(text, markup=False, highlight=False)


def report(as_json: bool, doc: Any, text: str) -> None:
    """A command's outcome: `doc` as the JSON document with --json, else `text` for people."""
    if as_json:
        emit_json(doc)
    else:
        line(text)
