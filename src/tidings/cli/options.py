"""Options many commands share, declared once so that their flags and help read the same
in every command, and the parsing of repeated `key=value` options."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated

import typer

from tidings.errors import ValidationError
from tidings.store import DEFAULT_URL, Create

# The default (None) lets `Settings` read TIDINGS_DB, like every other variable.
DbOption = Annotated[str | None, typer.Option(
    "--db", metavar="URL", show_default=False,
    help="Database: sqlite:///path.db or postgresql://… "
    f"(env TIDINGS_DB; default {DEFAULT_URL}).")]
JsonOption = Annotated[bool, typer.Option(
    "--json", help="Print one JSON document on stdout instead of tables.")]

# Commands that put the first things in a database (and `serve`, `worker`, `migrate`) may
# make a new one, in a folder that exists; `--create` makes the folders too. Every other
# command opens an existing database only (`tidings.cli.output.tidings`).
CreateOption = Annotated[bool, typer.Option(
    "--create", help="Also make the database file's folders when they do not exist (a "
    "new database is made in an existing folder without it; a missing folder is refused, "
    "so a mistyped --db cannot become an empty database).")]


def creating(folders: bool) -> Create:
    """What a command that may make a new database may create: `--create` adds folders."""
    return Create.FOLDERS if folders else Create.DATABASE


def without_create(command: Callable[..., None]) -> Callable[..., None]:
    """`command` without its `create_folders` parameter (`--create`), for the twin of a
    creating command that only changes what exists (`schedule update`, `email template
    update`): typer reads a command's options from its signature."""
    signature = inspect.signature(command, eval_str=True)
    command.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p for p in signature.parameters.values() if p.name != "create_folders"])
    return command


TagOption = Annotated[list[str] | None, typer.Option(help="A tag key=value (repeatable).")]

DEFAULT_DB: str | None = None  # the flag's default: TIDINGS_DB, else DEFAULT_URL

UrlOption = Annotated[str | None, typer.Option(
    "--url", metavar="URL", show_default=False,
    help="A remote node (env TIDINGS_URL); its token comes from TIDINGS_TOKEN.")]


def key_values(values: list[str] | None, option: str) -> dict[str, str]:
    """Repeated `key=value` options (tags, attributes) as a mapping; the last one wins."""
    out: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValidationError(option, f"must look like key=value, got {item!r}")
        out[key] = value
    return out
